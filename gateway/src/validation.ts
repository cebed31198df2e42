import { Ajv, type ValidateFunction } from 'ajv';
import formats from 'ajv-formats';
import type { FastifySchemaValidationError } from 'fastify';

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
 * PostgreSQL text cannot hold U+0000, so a string carrying it would fail deep in a service: it is
 * refused at the edge like any other invalid value, naming the field.
 */

const nulIssue = (instancePath: string, message: string): FastifySchemaValidationError => ({ keyword: 'nul', instancePath, schemaPath: '', params: {}, message });

function findNul(value: unknown, path: string): FastifySchemaValidationError | undefined {
  if (typeof value === 'string') {
    return value.includes('\u0000') ? nulIssue(path, 'must not contain NUL characters (U+0000)') : undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  for (const [key, child] of Object.entries(value)) {
    const pointer = `${path}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    if (key.includes('\u0000')) return nulIssue(pointer, 'must not contain NUL characters (U+0000) in its name');
    const issue = findNul(child, pointer);
    if (issue) return issue;
  }
  return undefined;
}

/** The schema's validator, then the NUL check; fastify reads `errors` on false, as with Ajv. */
export function withoutNul(validate: ValidateFunction): ((data: unknown) => boolean) & { errors?: FastifySchemaValidationError[] | null } {
  const check = (data: unknown): boolean => {
    if (!validate(data)) {
      check.errors = validate.errors ?? [];
      return false;
    }
    const issue = findNul(data, '');
    check.errors = issue ? [issue] : null;
    return issue === undefined;
  };
  check.errors = null as FastifySchemaValidationError[] | null;
  return check;
}
