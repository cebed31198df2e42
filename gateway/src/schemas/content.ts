import { Type } from '@sinclair/typebox';

/** Notification content fields, as /send and /templates take them. */

export const HttpUrl = (description: string) => Type.String({ maxLength: 2048, pattern: '^https?://[^\\s]+$', description });
export const Title = Type.String({ minLength: 1, maxLength: 256 });
export const Body = Type.String({ minLength: 1, maxLength: 2048 });
