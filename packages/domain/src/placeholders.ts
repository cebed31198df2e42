import type { FieldProblem } from '@herald/errors';

/** Template placeholders: checked where content is written, filled where a template is copied (campaigns, flow steps). */

/**
 * A placeholder: `{{name}}`, or `{{name|fallback}}` whose fallback is used when no value is given.
 * Names are letters, digits, `_` and `.` (e.g. `{{firstName}}`, `{{subscriber.externalId}}`); a
 * fallback is up to 200 characters without `|`, `{` or `}`.
 */
const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_.]{0,63})\s*(?:\|([^|{}]{0,200}))?\}\}/g;

/** Problems of the `{{...}}` in `text`: every `{{` must open a well-formed placeholder. */
export function placeholderProblem(text: string): string | undefined {
  const rest = text.replace(PLACEHOLDER, '');
  if (rest.includes('{{') || rest.includes('}}')) return 'has a malformed placeholder: write {{name}} or {{name|fallback}}';
  return undefined;
}

/** Placeholders filled for each recipient at delivery, from the subscriber record. */
const PER_SUBSCRIBER = 'subscriber.';

/**
 * A template's text with its placeholders filled from `variables` (a campaign copies the result).
 * A placeholder with no value takes its fallback; one with neither is a problem naming it.
 * Per-subscriber placeholders are not filled per recipient yet: they take their fallback, and one
 * without a fallback is refused rather than sent as literal braces.
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
  return text.replace(PLACEHOLDER, (whole, name: string, fallback: string | undefined) => {
    const value = name.startsWith(PER_SUBSCRIBER) ? undefined : variables[name];
    if (value !== undefined) return value;
    if (fallback !== undefined) return fallback.trim();
    problems.push({
      field: name.startsWith(PER_SUBSCRIBER) ? at.text : `${at.variables}.${name}`,
      in: 'body',
      problem: name.startsWith(PER_SUBSCRIBER)
        ? `holds ${whole}: per-subscriber placeholders need a fallback ({{${name}|...}}) until they are filled per recipient`
        : `is required by the template's ${field} ({{${name}}} has no default)`,
    });
    return whole;
  });
}
