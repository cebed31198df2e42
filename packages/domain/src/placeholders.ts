import type { FieldProblem } from '@herald/errors';

import { PLACEHOLDER_NAME } from './content.js';

/**
 * `{{placeholders}}` in notification content (title, body, action URL). `{{name}}` or
 * `{{name|fallback}}`: names are letters, digits, `_` and `.`; a fallback is up to 200 characters
 * without `|`, `{` or `}` and stands in when there is no value.
 *
 * Names under `subscriber.` are filled for each recipient at delivery, from its subscriber record:
 * `subscriber.id`, `subscriber.externalId`, `subscriber.customData.<key>` (nested keys with dots).
 * Every other name is a variable, filled when a campaign is created.
 */

const PLACEHOLDER = new RegExp(`\\{\\{\\s*(${PLACEHOLDER_NAME})\\s*(?:\\|([^|{}]{0,200}))?\\}\\}`, 'g');

const SUBSCRIBER_PREFIX = 'subscriber.';

/** A filled per-subscriber value is cut to this many characters (so content can be sized in advance). */
const MAX_SUBSCRIBER_VALUE_CHARS = 100;

/** What a per-subscriber placeholder reads. */
export interface SubscriberProfile {
  id: string;
  externalId: string;
  customData: Readonly<Record<string, unknown>>;
}

const CUSTOM_DATA = 'customData.';

/** Why `name` (after `subscriber.`) is not a field a placeholder can read, or undefined. */
function subscriberFieldProblem(field: string): string | undefined {
  if (field === 'id' || field === 'externalId') return undefined;
  if (field.startsWith(CUSTOM_DATA) && field.length > CUSTOM_DATA.length && !field.endsWith('.') && !field.includes('..')) return undefined;
  return `{{subscriber.${field}}} names no subscriber field: use subscriber.id, subscriber.externalId or subscriber.customData.<key>`;
}

/** Whether any text holds a per-subscriber placeholder (the fan-out then asks for profiles). */
export function hasSubscriberPlaceholders(...texts: string[]): boolean {
  return texts.some((text) => {
    for (const [, name] of text.matchAll(PLACEHOLDER)) if (name?.startsWith(SUBSCRIBER_PREFIX)) return true;
    return false;
  });
}

function valueOf(profile: SubscriberProfile, field: string): string | undefined {
  if (field === 'id') return profile.id || undefined;
  if (field === 'externalId') return profile.externalId || undefined;
  let value: unknown = profile.customData;
  for (const key of field.slice(CUSTOM_DATA.length).split('.')) {
    // Own keys only: `constructor` or `__proto__` name nothing the subscriber was given.
    if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.hasOwn(value, key)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  if (typeof value === 'string') return value || undefined;
  return typeof value === 'number' || typeof value === 'boolean' ? String(value) : undefined;
}

/**
 * `text` with its per-subscriber placeholders filled from `profile` (undefined: each takes its
 * fallback, or nothing). A value is cut to MAX_SUBSCRIBER_VALUE_CHARS and passed through
 * `encode` (an action URL encodes it as a URI component). Other placeholders are left as they are.
 */
export function fillSubscriberPlaceholders(text: string, profile: SubscriberProfile | undefined, encode: (value: string) => string = (value) => value): string {
  if (!text.includes('{{')) return text;
  return text.replace(PLACEHOLDER, (whole, name: string, fallback: string | undefined) => {
    if (!name.startsWith(SUBSCRIBER_PREFIX)) return whole;
    const value = profile && valueOf(profile, name.slice(SUBSCRIBER_PREFIX.length));
    if (value !== undefined) return encode(value.slice(0, MAX_SUBSCRIBER_VALUE_CHARS));
    return encode(fallback?.trim() ?? '');
  });
}

/**
 * `text` about as long as it can get once filled: each per-subscriber placeholder as a value of
 * full length (or its fallback, when longer). Values that grow when escaped or encoded can still
 * pass it; the fleet then sends that recipient the fallbacks instead (see the delivery service).
 */
export function atLongest(text: string): string {
  return fillSubscriberPlaceholders(text, undefined, (fallback) => 'x'.repeat(Math.max(MAX_SUBSCRIBER_VALUE_CHARS, fallback.length)));
}

/** Problems of the `{{...}}` in `text`: every `{{` opens a well-formed placeholder, and per-subscriber ones name a field. */
export function placeholderProblem(text: string): string | undefined {
  const rest = text.replace(PLACEHOLDER, '');
  if (rest.includes('{{') || rest.includes('}}')) return 'has a malformed placeholder: write {{name}} or {{name|fallback}}';
  for (const [, name] of text.matchAll(PLACEHOLDER)) {
    const problem = name?.startsWith(SUBSCRIBER_PREFIX) ? subscriberFieldProblem(name.slice(SUBSCRIBER_PREFIX.length)) : undefined;
    if (problem) return `holds ${problem}`;
  }
  return undefined;
}

/**
 * A template's text with its variables filled from `variables` (a campaign or a flow step copies the result). A
 * placeholder with no value takes its fallback; one with neither is a problem naming it.
 * Per-subscriber placeholders stay: the fleet fills them for each recipient.
 */
export function fillPlaceholders(
  text: string,
  variables: Readonly<Record<string, string>>,
  field: string,
  problems: FieldProblem[],
  /**
   * Where the request holds what a problem names: its variables (a missing one is `<variables>.<name>`)
   * and the text (`field` by default; a flow step's content is deeper in the body).
   */
  at: { variables: string; text: string } = { variables: 'variables', text: field },
): string {
  const problem = placeholderProblem(text);
  if (problem) {
    problems.push({ field: at.text, in: 'body', problem });
    return text;
  }
  return text.replace(PLACEHOLDER, (whole, name: string, fallback: string | undefined) => {
    if (name.startsWith(SUBSCRIBER_PREFIX)) return whole;
    // Own variables only: `{{toString}}` or `{{__proto__}}` is a variable like any other, not the prototype's.
    const value = Object.hasOwn(variables, name) ? variables[name] : undefined;
    if (value !== undefined) return value;
    if (fallback !== undefined) return fallback.trim();
    problems.push({ field: `${at.variables}.${name}`, in: 'body', problem: `is required by the template's ${field} ({{${name}}} has no default)` });
    return whole;
  });
}
