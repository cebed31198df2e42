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

/** proto3 strings are empty when unset; the API says null. */
export const orNull = (value: string): string | null => (value === '' ? null : value);
