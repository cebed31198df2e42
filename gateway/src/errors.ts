import type { Duplex } from 'node:stream';

import { backingServiceUnavailable, errorBody, HeraldError, invalidFields, isBackingServiceDown } from '@herald/errors';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import FindMyWay from 'find-my-way';

import { countRefusal } from './metrics.js';

/** Error rendering: every failure leaves in the spec's shape; a 5xx never shows internals. */

export interface ValidationIssue {
  keyword: string;
  instancePath: string;
  message?: string;
  params: Record<string, unknown>;
  /** Where in the schema it was raised, e.g. `#/then/required` (Ajv). */
  schemaPath?: string;
  /** The schema that raised it (Ajv's `verbose`). */
  parentSchema?: Record<string, unknown>;
}

function fieldOf(issue: ValidationIssue): string {
  const path = issue.instancePath.replace(/^\//, '').replaceAll('/', '.');
  const child = (issue.params.missingProperty ?? issue.params.additionalProperty) as string | undefined;
  return [path, child].filter(Boolean).join('.') || '(body)';
}

/** Formats named in words a caller knows, as the services name them. */
const formatProblems: Record<string, string> = { 'date-time': 'must be an ISO 8601 date-time' };

function problemOf(issue: ValidationIssue): string {
  // A requirement under a condition (if/then) says the condition: the `then` schema's description.
  const condition = issue.parentSchema?.description;
  if (issue.keyword === 'required' && issue.schemaPath?.endsWith('/then/required') && typeof condition === 'string') return `is required ${condition}`;
  if (issue.keyword === 'required') return 'is required';
  if (issue.keyword === 'format') return formatProblems[issue.params.format as string] ?? issue.message ?? 'is invalid';
  if (issue.keyword === 'additionalProperties') return 'is not allowed';
  return issue.message ?? 'is invalid';
}

/** What a union adds to the failure of the branch that applies: its `null` alternative, and the union itself. */
const isUnionNoise = (issue: ValidationIssue): boolean => issue.keyword === 'anyOf' || (issue.keyword === 'type' && issue.params.type === 'null');

/**
 * One problem per field. A value failing a nullable field (e.g. a bad URL) is named by the problem
 * of its non-null branch; one failing several alternatives (a scalar of any type) by the union's own.
 */
export function validationError(context: string, issues: ValidationIssue[]): HeraldError {
  const byField = new Map<string, ValidationIssue[]>();
  // An if/then's own issue ("must match then schema") only repeats those of its `then` branch.
  for (const issue of issues.filter(({ keyword }) => keyword !== 'if')) byField.set(fieldOf(issue), [...(byField.get(fieldOf(issue)) ?? []), issue]);
  return invalidFields(
    context,
    [...byField].map(([field, found]) => {
      const branches = found.filter((issue) => !isUnionNoise(issue));
      const union = found.find((issue) => issue.keyword === 'anyOf');
      const telling = branches.length === 1 ? branches[0] : (union ?? found[0]);
      return { field, in: context, problem: problemOf(telling as ValidationIssue) };
    }),
  );
}

/** Fastify's own 4xx errors (body parsing) become invalid_request with a plain explanation. */
function fromFastifyError(err: FastifyError, bodyLimit: number): HeraldError | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new HeraldError('invalid_request', 'The body must be JSON, sent with "Content-Type: application/json".', {
        title: 'Unsupported content type',
      });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new HeraldError('invalid_request', `The body is larger than ${bodyLimit} bytes.`, { title: 'Body too large' });
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new HeraldError('invalid_request', 'The body is empty but Content-Type says JSON.', { title: 'Invalid JSON' });
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new HeraldError('invalid_request', 'Content-Length does not match the body.', { title: 'Invalid request' });
    default:
      break;
  }
  if (err instanceof SyntaxError || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return new HeraldError('invalid_request', 'The body is not valid JSON.', { title: 'Invalid JSON' });
  }
  if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
    return new HeraldError('invalid_request', err.message, { title: 'Invalid request' });
  }
  return undefined;
}

/**
 * Errors the router raises before any hook runs (a malformed percent-encoding, an absurdly long
 * path segment): still a 400 in the shared shape. Fastify's `frameworkErrors` option.
 */
export const frameworkErrors =
  (documentationBase: string) =>
  (err: FastifyError, _request: FastifyRequest, reply: FastifyReply): void => {
    const error = new HeraldError('invalid_request', err.message, { title: 'Invalid request' });
    void reply.code(400).type('application/json').send(errorBody(error, documentationBase));
  };

/**
 * Requests Node's HTTP parser refuses before fastify sees them (a request line and headers over
 * 16 KiB, a malformed request): a 400 in the shared shape, then the connection closes. Timeouts
 * keep Node's 408. Fastify's `clientErrorHandler` option.
 */
export const clientErrors =
  (documentationBase: string) =>
  (err: NodeJS.ErrnoException, socket: Duplex): void => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    if (socket.writable) {
      if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') socket.write('HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      else {
        const message = err.code === 'HPE_HEADER_OVERFLOW' ? 'The request line and headers are larger than 16 KiB.' : 'The request is not valid HTTP.';
        const body = JSON.stringify(errorBody(new HeraldError('invalid_request', message, { title: 'Invalid request' }), documentationBase));
        socket.write(
          `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        );
      }
    }
    socket.destroy(err);
  };

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** Plan errors raised by services do not know where upgrades happen; the edge adds it. */
const upgradeCodes = new Set(['subscription_required', 'plan_upgrade_required', 'plan_limit_exceeded']);

export interface ErrorHandlingOptions {
  documentationBase: string;
  openapiUrl: string;
  bodyLimit: number;
  upgradeUrl: string;
}

export function installErrorHandling(app: FastifyInstance, { documentationBase, openapiUrl, bodyLimit, upgradeUrl }: ErrorHandlingOptions): void {
  // A second router holding every path lets 404 and 405 be told apart.
  const known = FindMyWay({ ignoreTrailingSlash: false });
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) known.on(method as (typeof METHODS)[number], route.url, () => undefined);
  });

  app.setErrorHandler((err: FastifyError, request, reply) => {
    let heraldError: HeraldError | undefined;
    if (err instanceof HeraldError) heraldError = err;
    else if (err.validation) heraldError = validationError(err.validationContext ?? 'body', err.validation as ValidationIssue[]);
    else if (isBackingServiceDown(err)) heraldError = backingServiceUnavailable();
    else heraldError = fromFastifyError(err, bodyLimit);
    if (!heraldError) {
      request.log.error({ err }, 'unhandled error');
      heraldError = new HeraldError('internal_error', 'An unexpected error occurred.', {
        title: 'Internal server error',
        extra: { requestId: request.id },
      });
    } else if (heraldError.status >= 500) {
      request.log.warn({ code: heraldError.code }, heraldError.message);
    }
    countRefusal(request, heraldError);
    if (upgradeCodes.has(heraldError.code) && heraldError.extra.upgradeUrl === undefined) {
      heraldError.extra.upgradeUrl = upgradeUrl;
    }
    if (heraldError.code === 'rate_limited' && heraldError.extra.retryAfter !== undefined) {
      void reply.header('retry-after', String(heraldError.extra.retryAfter));
    }
    void reply.code(heraldError.status).type('application/json').send(errorBody(heraldError, documentationBase));
  });

  app.setNotFoundHandler(async (request, reply) => {
    // A request with a valid key is counted and carries its X-RateLimit headers, routed or not.
    await app.identifyCaller?.(request, reply);
    const path = request.url.split('?')[0] ?? '/';
    const allowed = METHODS.filter((method) => known.find(method, path) !== null);
    if (allowed.length > 0) {
      const error = new HeraldError('method_not_allowed', `${request.method} is not allowed on ${path}.`, {
        title: 'Method not allowed',
        extra: { allowed },
      });
      return reply.code(405).header('allow', allowed.join(', ')).send(errorBody(error, documentationBase));
    }
    const error = new HeraldError('not_found', `No endpoint at ${request.method} ${path}.`, {
      title: 'Not found',
      hint: 'See the OpenAPI description for every endpoint.',
      extra: { openapi: openapiUrl },
    });
    return reply.code(404).send(errorBody(error, documentationBase));
  });
}
