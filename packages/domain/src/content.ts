/**
 * The bounds of a notification's content, wherever it is given: POST /send, templates and
 * campaigns (the gateway's route schemas, and from them the OpenAPI document and the SDKs' and
 * agent tools' generated types) and flow steps (checked by the flow service).
 */
export const CONTENT_LIMITS = {
  title: 256,
  body: 2_048,
  /** Each of iconUrl, imageUrl, actionUrl (url on /send). */
  url: 2_048,
  /** A template referred to by its id. */
  templateId: 64,
  /** Values for a template's placeholders: how many, and each one's length. */
  variables: 50,
  variable: 1_000,
} as const;

/** An http(s) URL without whitespace, as a JSON Schema (ECMAScript) pattern. */
export const HTTP_URL_PATTERN = '^https?://[^\\s]+$';

/** A placeholder's name: a letter or _, then letters, digits, _ or . (64 characters at most). */
export const PLACEHOLDER_NAME = '[A-Za-z_][A-Za-z0-9_.]{0,63}';
/** A template variable is named as a placeholder is. */
export const VARIABLE_NAME_PATTERN = `^${PLACEHOLDER_NAME}$`;
