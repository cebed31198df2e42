import swagger from '@fastify/swagger';
import { Type, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance, FastifySchema, RouteOptions } from 'fastify';

import type { RouteAccess } from './access.js';
import { PUBLIC_PREFIX } from './prefixes.js';
import { ErrorResponse, Nullable } from './schemas/common.js';
import { AnsweredBy } from './schemas/questions.js';
import { StaticBody } from './static-body.js';

/**
 * The OpenAPI 3.1 description, generated from the route schemas at startup (never written by
 * hand): every REST route under /api/v1 is in it, with its security, tags and error responses
 * filled in from the route's access rule where the route does not say. Served at /openapi.json and
 * /openapi.yaml.
 */

export const OPENAPI_VERSION = '1.0.0';

/** Documented: the REST endpoints. Pages, the docs, CORS preflights and HEAD are not. */
function isDocumented(method: string, url: string): boolean {
  return url.startsWith(`${PUBLIC_PREFIX}/`) && method !== 'OPTIONS' && method !== 'HEAD';
}

/** The error responses every documented operation may return, named in components.responses. */
const errorResponses: Record<string, { name: string; description: string }> = {
  400: { name: 'BadRequest', description: 'invalid_request: the body, query, path or headers are wrong; `fields` names each bad field' },
  401: { name: 'Unauthorized', description: 'unauthorized: the key is missing, malformed, unknown, revoked or expired' },
  403: {
    name: 'Forbidden',
    description: 'forbidden, subscription_required, plan_upgrade_required, plan_limit_exceeded or partner_decision_required (with `upgradeUrl` for the plan ones)',
  },
  404: { name: 'NotFound', description: "not_found: no such object in this workspace (another workspace's is 404 too), or no such path (with `openapi`)" },
  405: { name: 'MethodNotAllowed', description: 'method_not_allowed: the path exists but not with this method; the `Allow` header and `allowed` list the methods' },
  409: { name: 'Conflict', description: "conflict: the object's state does not allow this (already answered, idempotency key reused with another request, …)" },
  410: { name: 'Gone', description: 'gone: it has expired' },
  429: { name: 'RateLimited', description: 'rate_limited: wait `retryAfter` seconds (the `Retry-After` header)' },
  500: { name: 'InternalError', description: 'internal_error: an unexpected failure; `requestId` identifies it' },
  503: { name: 'Unavailable', description: 'unavailable: a backing service is down or the gateway is shutting down; retry' },
};
/** Added to every operation besides what its route declares (withErrors has 400-429). */
const alwaysPossible = [500, 503];

/** The shared error shape with the fields some errors add. */
const ErrorSchema = Type.Object(
  {
    ...ErrorResponse.properties,
    fields: Type.Optional(Type.Array(Type.Object({ field: Type.String(), in: Type.String(), problem: Type.String() }), { description: '400: each bad field' })),
    upgradeUrl: Type.Optional(Type.String({ description: '403 plan errors: where to upgrade' })),
    allowed: Type.Optional(Type.Array(Type.String(), { description: '405: the methods the path has' })),
    openapi: Type.Optional(Type.String({ description: '404 for an unknown path: this document' })),
    requestId: Type.Optional(Type.String({ description: '500: the request id to report' })),
    retryAfter: Type.Optional(Type.Integer({ description: '429: seconds to wait' })),
    resetIn: Type.Optional(Type.Integer({ description: '429: seconds to wait (same as retryAfter)' })),
    limit: Type.Optional(Type.Integer({ description: '429: requests per minute of the plan' })),
  },
  { additionalProperties: true, description: 'Every error: branch on `status` and `code`, never on the message. See /docs/errors.' },
);

const rateLimitHeaders = {
  'X-RateLimit-Limit': { description: 'Requests per minute of the plan', schema: { type: 'integer' } },
  'X-RateLimit-Remaining': { description: 'Requests left in the current 60-second window', schema: { type: 'integer' } },
  'X-RateLimit-Reset': { description: 'Epoch seconds at which a slot frees up', schema: { type: 'integer' } },
};

function componentResponses() {
  const content = { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } };
  const responses: Record<string, unknown> = {};
  for (const [code, { name, description }] of Object.entries(errorResponses)) {
    const headers =
      code === '405'
        ? { Allow: { description: 'The methods the path has', schema: { type: 'string' } } }
        : code === '429'
          ? { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } }, ...rateLimitHeaders }
          : undefined;
    responses[name] = { description, content, ...(headers ? { headers } : {}) };
  }
  return responses;
}

/** Standard Webhooks headers on every webhook Herald sends. */
const webhookHeaders = [
  { name: 'webhook-id', description: 'msg_<24 base32>; the same on every retry: dedupe on it', schema: { type: 'string', pattern: '^msg_[a-z2-7]{24}$' } },
  { name: 'webhook-timestamp', description: 'Epoch seconds of this attempt; refuse it when more than 5 minutes off', schema: { type: 'string', pattern: '^[0-9]+$' } },
  { name: 'webhook-signature', description: 'Space-separated v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">, one per signing secret', schema: { type: 'string' } },
].map((header) => ({ ...header, in: 'header', required: true }));

interface WebhookEventType {
  type: string;
  summary: string;
  data: TSchema;
}

/** What services/decision/src/webhooks.ts sends to a question's `callbackUrl`. */
const questionFields = (status: string) => ({
  question: Type.String(),
  type: Type.String({ description: 'confirm | select | input' }),
  status: Type.Literal(status),
});
const AskEvent = (status: string) =>
  Type.Object({
    correlationId: Type.String(),
    ...questionFields(status),
    answered: Type.Boolean(),
    value: Type.Optional(Type.String({ description: 'The answer; present when answered' })),
    answeredBy: AnsweredBy,
  });
const DecisionEvent = (status: string) =>
  Type.Object({
    decisionId: Type.String(),
    ...questionFields(status),
    approved: Type.Boolean({ description: 'True only for a yes to a confirm decision; never for cancelled or expired' }),
    answer: Nullable(Type.String()),
    externalId: Nullable(Type.String()),
    toolName: Nullable(Type.String()),
    idempotencyKey: Nullable(Type.String()),
    answeredBy: AnsweredBy,
  });

const webhookEvents: WebhookEventType[] = [
  { type: 'ask.answered', summary: 'A question asked with POST /ask was answered', data: AskEvent('answered') },
  { type: 'ask.withdrawn', summary: 'A question was withdrawn (DELETE /ask/{correlationId})', data: AskEvent('withdrawn') },
  { type: 'ask.expired', summary: 'A question expired unanswered (never an approval)', data: AskEvent('timeout') },
  { type: 'decision.answered', summary: 'A decision was answered', data: DecisionEvent('answered') },
  { type: 'decision.cancelled', summary: 'A pending decision was cancelled', data: DecisionEvent('cancelled') },
  { type: 'decision.expired', summary: 'A decision expired unanswered (never an approval)', data: DecisionEvent('expired') },
];

function webhookOperation({ type, summary, data }: WebhookEventType) {
  const body = Type.Object(
    {
      type: Type.Literal(type),
      timestamp: Type.String({ description: 'ISO 8601: when the event happened' }),
      data,
    },
    { additionalProperties: false },
  );
  return {
    post: {
      operationId: `webhook_${type.replace(/\W/g, '_')}`,
      summary,
      description: 'Signed per Standard Webhooks; verify before trusting it (see /docs/webhooks). Any 2xx within 10 s is delivered; anything else is retried.',
      tags: ['Webhooks'],
      parameters: webhookHeaders,
      requestBody: { required: true, content: { 'application/json': { schema: body } } },
      responses: { '2XX': { description: 'Received' } },
    },
  };
}

function securityOf(access: RouteAccess | undefined): Array<Record<string, string[]>> {
  if (access === undefined || 'public' in access) return [];
  // A member's session works wherever a key does (its role decides; state changes need X-CSRF-Token).
  return 'siteKey' in access ? [{ siteKey: [] }] : [{ apiKey: [] }, { session: [] }];
}

const words = (url: string) =>
  url
    .slice(url.startsWith('/api/v1/server/') ? '/api/v1/server/'.length : `${PUBLIC_PREFIX}/`.length)
    .split('/')
    .filter((segment) => segment !== '');
const capitalised = (word: string) => word.charAt(0).toUpperCase() + word.slice(1);

/** Defaults for a route that does not name its own: `getSubscribersBySubscriberId`, tag `Subscribers`. */
function operationIdOf(method: string, url: string): string {
  const parts = words(url).map((segment) =>
    segment.startsWith(':') ? `By${capitalised(segment.slice(1))}` : segment.split(/[^A-Za-z0-9]+/).map(capitalised).join(''),
  );
  return method.toLowerCase() + parts.join('');
}
const tagOf = (url: string): string => capitalised(words(url)[0] ?? 'Other');

interface DocumentedSchema extends FastifySchema {
  hide?: boolean;
  tags?: readonly string[];
  summary?: string;
  operationId?: string;
  security?: Array<Record<string, string[]>>;
  response?: Record<string, unknown>;
}

function transformRoute({ schema, url, route }: { schema: FastifySchema; url: string; route: RouteOptions }) {
  const method = [route.method].flat()[0] ?? 'GET';
  const given = (schema ?? {}) as DocumentedSchema;
  if (!isDocumented(method, url)) return { schema: { ...given, hide: true }, url };
  const security = securityOf(route.config?.access);
  const response: Record<string, unknown> = { ...given.response };
  const defaults = [400, ...(security.length > 0 ? [401] : []), 403, 404, 429, ...alwaysPossible];
  for (const code of defaults) response[code] ??= ErrorResponse;
  const documented: DocumentedSchema = {
    ...given,
    operationId: given.operationId ?? operationIdOf(method, url),
    tags: given.tags ?? [tagOf(url)],
    summary: given.summary ?? `${method} ${url}`,
    security,
    response,
  };
  return { schema: documented, url };
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The generator inlines ErrorResponse without its $id: it is recognised by its fields. */
const errorFields = JSON.stringify(Object.keys(ErrorResponse.properties));
const isErrorShape = (schema: unknown): boolean =>
  isObject(schema) && isObject(schema.properties) && JSON.stringify(Object.keys(schema.properties)) === errorFields && schema.additionalProperties === true;

/** Each inline copy of the shared error shape becomes a reference to its named response. */
function referenceErrors(paths: Json): void {
  for (const pathItem of Object.values(paths)) {
    if (!isObject(pathItem)) continue;
    for (const operation of Object.values(pathItem)) {
      const responses = isObject(operation) ? operation.responses : undefined;
      if (!isObject(responses)) continue;
      for (const [code, response] of Object.entries(responses)) {
        const named = errorResponses[code];
        const schema = isObject(response) && isObject(response.content) ? (response.content['application/json'] as Json | undefined)?.schema : undefined;
        if (named && isErrorShape(schema)) responses[code] = { $ref: `#/components/responses/${named.name}` };
      }
    }
  }
}

/** Registers the generator and the two documents; call it before any route is registered, so the generator sees each one. */
export async function registerOpenApi(app: FastifyInstance, publicOrigin: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Herald API',
        version: OPENAPI_VERSION,
        description:
          "Push notifications and human approval. Server endpoints are under /api/v1/server and take a full API key; the browser SDK's under /api/v1 take the public site key. " +
          `Errors share one shape (components.schemas.Error, documented at ${publicOrigin}/docs/errors): an unknown path is 404 with \`openapi\` pointing here, a known path with another method 405 with \`Allow\`. ` +
          `Guides: ${publicOrigin}/llms.txt.`,
      },
      externalDocs: { description: 'Documentation', url: `${publicOrigin}/docs/quick-start` },
      servers: [{ url: publicOrigin }],
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', bearerFormat: 'pk_<id>.<secret>', description: 'A full API key (secret: server side only)' },
          siteKey: { type: 'http', scheme: 'bearer', bearerFormat: 'pk_<id>', description: "The site's public key, for the browser SDK; the request's Origin must be the site's domain" },
          session: {
            type: 'apiKey',
            in: 'cookie',
            name: 'herald_session',
            description: "A signed-in member's session (POST /sign-in/links, then the emailed link; or POST /sign-in/passkey); its role decides what it may call, and every state-changing request also needs the X-CSRF-Token header from GET /me",
          },
        },
      },
    },
    // 3.1 is JSON Schema 2020-12: `const` stays `const`.
    convertConstToEnum: false,
    transform: transformRoute,
    transformObject: (documentObject) => {
      const document = 'openapiObject' in documentObject ? (documentObject.openapiObject as Json) : (documentObject.swaggerObject as Json);
      const components = document.components as Json;
      components.schemas = { ...(components.schemas as Json), Error: ErrorSchema };
      components.responses = componentResponses();
      referenceErrors(document.paths as Json);
      document.webhooks = Object.fromEntries(webhookEvents.map((event) => [event.type, webhookOperation(event)]));
      return document as never;
    },
  });

  // Built once, when every route is known; both forms are one document.
  let json = new StaticBody('', 'application/json; charset=utf-8');
  let yaml = new StaticBody('', 'application/yaml; charset=utf-8');
  app.addHook('onReady', async () => {
    json = new StaticBody(JSON.stringify(app.swagger()), json.contentType);
    yaml = new StaticBody(app.swagger({ yaml: true }), yaml.contentType);
  });
  const config = { access: { public: true } } as const;
  app.get('/openapi.json', { config }, async (request, reply) => json.send(request, reply));
  app.get('/openapi.yaml', { config }, async (request, reply) => yaml.send(request, reply));
}
