import { Ajv, type ValidateFunction } from 'ajv';
import formats from 'ajv-formats';
import type { FastifySchemaValidationError } from 'fastify';

import { validationError } from './errors.js';

/**
 * The validator of request bodies, query strings, path parameters and MCP arguments: every problem
 * reported, the schemas' formats (date-time, ...) checked, nothing removed, defaults filled in.
 * Bodies are taken as sent (`coerceTypes: false`); text (query strings, path parameters) is coerced
 * to its declared types (`'array'`). Verbose, so an issue carries the schema that raised it (errors.ts).
 */
export function schemaValidator(coerceTypes: false | 'array'): Ajv {
  const ajv = new Ajv({ allErrors: true, coerceTypes, removeAdditional: false, useDefaults: true, strict: false, verbose: true });
  formats.default(ajv);
  return ajv;
}

/**
 * Text PostgreSQL cannot store as sent is refused at the edge like any other invalid value, naming
 * the field: U+0000 (text cannot hold it), and lone UTF-16 surrogates (a JSON `"\ud800"`: jsonb
 * refuses it deep in a service, text stores it as U+FFFD, so two different ids would become one).
 * JSON nested deeper than MAX_JSON_DEPTH is refused before it is parsed.
 */

/** Objects and arrays inside one another: no Herald body needs more; recursive code never sees more. */
export const MAX_JSON_DEPTH = 32;

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const SURROGATE_PROBLEM = 'must not contain lone UTF-16 surrogates (\\uD800-\\uDFFF without its pair)';

const issue = (instancePath: string, keyword: string, message: string): FastifySchemaValidationError => ({ keyword, instancePath, schemaPath: '', params: {}, message });

/** The problem of one string (a value, or a property's name), or undefined. */
function textProblem(text: string, checkNul: boolean): { keyword: string; message: string } | undefined {
  if (checkNul && text.includes('\u0000')) return { keyword: 'nul', message: 'must not contain NUL characters (U+0000)' };
  if (LONE_SURROGATE.test(text)) return { keyword: 'surrogate', message: SURROGATE_PROBLEM };
  return undefined;
}

function findUnstorable(value: unknown, path: string, checkNul: boolean): FastifySchemaValidationError | undefined {
  if (typeof value === 'string') {
    const problem = textProblem(value, checkNul);
    return problem && issue(path, problem.keyword, problem.message);
  }
  if (typeof value !== 'object' || value === null) return undefined;
  for (const [key, child] of Object.entries(value)) {
    const pointer = `${path}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    const problem = textProblem(key, checkNul);
    if (problem) return issue(pointer, problem.keyword, `${problem.message} in its name`);
    const found = findUnstorable(child, pointer, checkNul);
    if (found) return found;
  }
  return undefined;
}

/** The schema's validator, then the NUL and surrogate checks; fastify reads `errors` on false, as with Ajv. */
export function withStorableText(validate: ValidateFunction): ((data: unknown) => boolean) & { errors?: FastifySchemaValidationError[] | null } {
  const check = (data: unknown): boolean => {
    if (!validate(data)) {
      check.errors = validate.errors ?? [];
      return false;
    }
    const found = findUnstorable(data, '', true);
    check.errors = found ? [found] : null;
    return found === undefined;
  };
  check.errors = null as FastifySchemaValidationError[] | null;
  return check;
}

/** Whether JSON text nests objects and arrays deeper than `limit` (strings skipped): one pass, before parsing. */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (inString) {
      if (code === 0x5c) index += 1; // backslash: the next character is escaped
      else if (code === 0x22) inString = false;
    } else if (code === 0x22) inString = true;
    else if (code === 0x7b || code === 0x5b) {
      depth += 1;
      if (depth > limit) return true;
    } else if (code === 0x7d || code === 0x5d) depth -= 1;
  }
  return false;
}

/** A parsed JSON body's lone surrogates: a 400 naming the field (any body, MCP's included, schema or not). */
export function surrogateError(body: unknown) {
  const found = findUnstorable(body, '', false);
  return found && validationError('body', [found]);
}
