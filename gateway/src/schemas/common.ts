import { HeraldError } from '@herald/errors';
import { Type, type TSchema } from '@sinclair/typebox';

/** Schemas shared by several routes. */

export const ErrorResponse = Type.Object(
  {
    error: Type.String(),
    code: Type.String(),
    status: Type.Integer(),
    message: Type.String(),
    hint: Type.String(),
    documentation: Type.String(),
  },
  { additionalProperties: true, $id: 'Error' },
);

/** The error responses every authenticated operation may return. */
export function withErrors<T extends Record<number, TSchema>>(responses: T) {
  return { 400: ErrorResponse, 401: ErrorResponse, 403: ErrorResponse, 404: ErrorResponse, 429: ErrorResponse, ...responses };
}

export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** The shared paging query: `limit` 1-100 (default 100), and the previous page's `nextCursor` as `cursor`. */
export const PageQuery = {
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 100 }),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 400, description: 'nextCursor of the previous page' })),
};

/** A page of `item`: `nextCursor` is null on the last one. */
export const PageOf = <T extends TSchema>(item: T) => Type.Object({ data: Type.Array(item), hasMore: Type.Boolean(), nextCursor: Nullable(Type.String()) });

/** proto3 strings are empty when unset; the API says null. */
export const orNull = (value: string): string | null => (value === '' ? null : value);

/** A JSON scalar: what a tool-call parameter may be (string up to 1000 characters). */
export const Scalar = Type.Union([Type.String({ maxLength: 1_000 }), Type.Number(), Type.Boolean(), Type.Null()]);

/** Tool-call arguments: an object of at most 32 scalars (POST /authorize, POST /decisions). */
export const Parameters = Type.Record(Type.String(), Scalar, {
  maxProperties: 32,
  propertyNames: { minLength: 1, maxLength: 64 },
  description: 'The call arguments: scalars only (resource tags)',
});

/** Which browser subscribers to reach (POST /send, POST /ask); the kinds combine with AND. */
const Ids = (description: string) => Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 1_000, description });
export const Targeting = {
  subscriberIds: Type.Optional(Ids('Only these subscribers')),
  externalIds: Type.Optional(Ids('Only the subscribers with these external ids')),
  tags: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 20, description: 'Subscribers holding every tag' })),
};

export const IdempotencyKey = Type.String({ minLength: 1, maxLength: 200 });
export const IdempotencyHeaders = Type.Object({ 'idempotency-key': Type.Optional(IdempotencyKey) });

/** The `Idempotency-Key` header or the body's `idempotencyKey`; both given must match (else 400). */
export function idempotencyKeyOf(headerKey: string | undefined, bodyKey: string | undefined): string | undefined {
  if (headerKey !== undefined && bodyKey !== undefined && headerKey !== bodyKey) {
    throw new HeraldError('invalid_request', 'The Idempotency-Key header and the body idempotencyKey differ.', {
      title: 'Invalid request',
      extra: { fields: [{ field: 'idempotencyKey', in: 'body', problem: 'must match the Idempotency-Key header' }] },
    });
  }
  return headerKey ?? bodyKey;
}
