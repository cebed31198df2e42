/**
 * The parts of the gateway's OpenAPI document the generators read: an operation's request or
 * success body, and a place inside it.
 */

/** The JSON Schema keywords the route schemas use (TypeBox's output). */
export interface Schema {
  $ref?: string;
  type?: string | string[];
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  anyOf?: Schema[];
  enum?: Array<string | number | boolean>;
  const?: string | number | boolean;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
}

interface Operation {
  operationId?: string;
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, { content?: Record<string, { schema?: Schema }> }>;
}

export interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
}

/**
 * Where a shape is: `[body:]<operationId>[.<property>|[]|{}]...`: the success body (200, or 201
 * for the creating operations) or with `body:` the request body, then properties, `[]` an array's
 * items and `{}` a record's values. A nullable shape stands for the shape it makes nullable.
 */
export function locate(document: OpenApiDocument, where: string): Schema {
  const [, request, operationId = '', rest = ''] = /^(body:)?([A-Za-z]+)(.*)$/.exec(where) ?? [];
  const operation = Object.values(document.paths)
    .flatMap((methods) => Object.values(methods))
    .find((candidate) => candidate.operationId === operationId);
  if (!operation) throw new Error(`${where}: no operation ${operationId} in the OpenAPI document`);
  const content = request ? operation.requestBody?.content : (operation.responses?.['200'] ?? operation.responses?.['201'])?.content;
  let schema = content?.['application/json']?.schema;
  if (!schema) throw new Error(`${where}: ${operationId} has no JSON ${request ? 'request' : 'success'} body`);
  schema = unwrap(document, schema);
  for (const step of rest.match(/\[\]|\{\}|[^.[\]{}]+/g) ?? []) {
    const next = step === '[]' ? schema.items : step === '{}' ? (typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined) : schema.properties?.[step];
    if (!next) throw new Error(`${where}: nothing at ${step}`);
    schema = unwrap(document, next);
  }
  return schema;
}

/** `schema` with its `$ref` followed (into components.schemas) and its null alternative dropped. */
export function unwrap(document: OpenApiDocument, schema: Schema): Schema {
  const resolved = resolve(document, schema);
  const alternatives = resolved.anyOf?.filter((alternative) => resolve(document, alternative).type !== 'null');
  return alternatives?.length === 1 && alternatives[0] ? resolve(document, alternatives[0]) : resolved;
}

export function resolve(document: OpenApiDocument, schema: Schema): Schema {
  if (schema.$ref === undefined) return schema;
  const name = /^#\/components\/schemas\/(.+)$/.exec(schema.$ref)?.[1];
  const target = name === undefined ? undefined : document.components?.schemas?.[name];
  if (!target) throw new Error(`unresolvable $ref ${schema.$ref}`);
  return resolve(document, target);
}

/** The literal values of an enumeration (`enum`, a `const`, or `anyOf` of `const`s); undefined for anything else. */
export function literals(document: OpenApiDocument, schema: Schema): Array<string | number | boolean> | undefined {
  if (schema.enum) return schema.enum;
  if (schema.const !== undefined) return [schema.const];
  const members = schema.anyOf?.map((member) => resolve(document, member).const);
  return members?.every((member) => member !== undefined) ? (members as Array<string | number | boolean>) : undefined;
}
