import { Type } from '@sinclair/typebox';

/** Notification content fields, as /send, /templates and /campaigns take them. */

export const HttpUrl = (description: string) => Type.String({ maxLength: 2048, pattern: '^https?://[^\\s]+$', description });
export const Title = Type.String({ minLength: 1, maxLength: 256 });
export const Body = Type.String({ minLength: 1, maxLength: 2048 });
/** The same bounds, with a description of their own. */
export const TitleAs = (description: string) => Type.String({ minLength: 1, maxLength: 256, description });
export const BodyAs = (description: string) => Type.String({ minLength: 1, maxLength: 2048, description });
/** An internal name (templates, campaigns). */
export const Name = Type.String({ minLength: 1, maxLength: 200 });
/** An action URL may hold placeholders, so only its scheme is checked here. */
export const ActionUrl = Type.String({ minLength: 1, maxLength: 2048, pattern: '^(https?://|\\{\\{)[^\\s]*$', description: 'Opened on click; may hold {{placeholders}}' });
export const PLACEHOLDERS = 'May hold placeholders: {{name}}, or {{name|fallback}} with a default.';
