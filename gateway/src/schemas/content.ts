import { CONTENT_LIMITS, HTTP_URL_PATTERN } from '@herald/domain';
import { Type } from '@sinclair/typebox';

/** Notification content fields, as /send, /templates and /campaigns take them (bounds: @herald/domain, which flow steps share). */

export const HttpUrl = (description: string) => Type.String({ maxLength: CONTENT_LIMITS.url, pattern: HTTP_URL_PATTERN, description });
export const Title = Type.String({ minLength: 1, maxLength: CONTENT_LIMITS.title });
export const Body = Type.String({ minLength: 1, maxLength: CONTENT_LIMITS.body });
/** The same bounds, with a description of their own. */
export const TitleAs = (description: string) => Type.String({ minLength: 1, maxLength: CONTENT_LIMITS.title, description });
export const BodyAs = (description: string) => Type.String({ minLength: 1, maxLength: CONTENT_LIMITS.body, description });
/** An internal name (templates, campaigns). */
export const Name = Type.String({ minLength: 1, maxLength: 200 });
/** An action URL may hold placeholders, so only its scheme is checked here. */
export const ActionUrl = Type.String({ minLength: 1, maxLength: CONTENT_LIMITS.url, pattern: '^(https?://|\\{\\{)[^\\s]*$', description: 'Opened on click; may hold {{placeholders}}' });
export const PLACEHOLDERS = 'May hold placeholders: {{name}}, or {{name|fallback}} with a default.';
