import { randomUUID } from 'node:crypto';

import type { Bus } from '@herald/bus';
import { HeraldError } from '@herald/errors';
import type { Logger } from '@herald/logging';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';

import type { ServiceClients } from './clients.js';
import type { GatewayConfig } from './config.js';
import { registerDocs } from './docs.js';
import { clientErrors, frameworkErrors, installErrorHandling } from './errors.js';
import { registerOpenApi } from './openapi.js';
import { authentication } from './plugins/authentication.js';
import { health } from './plugins/health.js';
import { routeMetrics } from './plugins/metrics.js';
import { RateLimiter } from './rate-limit.js';
import { registerRoutes } from './routes/index.js';
import { MAX_JSON_DEPTH, nestsDeeperThan, schemaValidator, surrogateError, withStorableText } from './validation.js';
import { Waiters } from './waiters.js';

/**
 * The gateway as a plugin tree: external plugins (swagger, docs), app plugins (errors, validation,
 * authentication and rate limits, health and drain), then the routes (routes/index.ts, one module
 * per resource, schemas shared through schemas/).
 */

export { API_PREFIX } from './prefixes.js';

export interface AppDependencies {
  config: GatewayConfig;
  clients: ServiceClients;
  redis: Redis;
  /** Where engagement reports are published. */
  bus: Bus;
  logger: Logger;
}

export type App = FastifyInstance;

/** Trusts the nearest `hops` proxies, whatever their addresses (fastify's numeric trustProxy, typed). */
const hopsTrusted =
  (hops: number) =>
  (_address: string, hop: number): boolean =>
    hop < hops;

export async function buildApp({ config, clients, redis, bus, logger }: AppDependencies): Promise<App> {
  const documentationBase = `${config.publicOrigin}/docs/errors`;
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: config.bodyLimitBytes,
    // request.ip (per-IP limits, logs) is read through these proxies' X-Forwarded-For only.
    trustProxy: typeof config.trustProxy === 'number' ? hopsTrusted(config.trustProxy) : config.trustProxy,
    requestTimeout: config.requestTimeoutMs,
    // Node checks these time-outs only every connectionsCheckingInterval (30 s by default), so a
    // client trickling header lines would hold its socket that long past HEADERS_TIMEOUT_MS.
    http: { headersTimeout: Math.min(config.headersTimeoutMs, config.requestTimeoutMs), connectionsCheckingInterval: 1_000 },
    // The server's own id for every request: a client's X-Request-Id is never adopted (it could
    // forge or merge log lines); it is logged beside, as clientRequestId (cut to 128 characters).
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    childLoggerFactory: (parent, bindings, options, rawRequest) => {
      const supplied = rawRequest.headers['x-request-id'];
      return parent.child(typeof supplied === 'string' ? { ...bindings, clientRequestId: supplied.slice(0, 128) } : bindings, options);
    },
    // Path parameters are bounded by their schemas (a 400 naming the field), not by the router's 100.
    routerOptions: { maxParamLength: 2_048 },
    frameworkErrors: frameworkErrors(documentationBase),
    clientErrorHandler: clientErrors(documentationBase),
    return503OnClosing: true,
    // On close, idle keep-alive sockets are closed at once; busy ones finish their request.
    forceCloseConnections: 'idle',
  }).withTypeProvider<TypeBoxTypeProvider>();

  // Bodies are taken as sent: no type coercion and no silent removal of unknown fields.
  // Query strings and path parameters arrive as text, so they are coerced to their declared types.
  const bodyValidator = schemaValidator(false);
  const textValidator = schemaValidator('array');
  app.setValidatorCompiler(({ schema, httpPart }) => withStorableText((httpPart === 'body' ? bodyValidator : textValidator).compile(schema)));

  // JSON only: a text/plain body is refused instead of arriving as a string.
  app.removeContentTypeParser('text/plain');
  // JSON bodies must be valid UTF-8: the default parser decodes leniently, so invalid bytes would
  // be stored as U+FFFD instead of refused. Parsing itself stays fastify's (proto poisoning refused).
  const parseJson = app.getDefaultJsonParser('error', 'error');
  const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    let text: string;
    try {
      text = strictUtf8.decode(body as Buffer);
    } catch {
      done(new HeraldError('invalid_request', 'The body is not valid UTF-8.', { title: 'Invalid JSON' }), undefined);
      return;
    }
    // Refused before parsing: recursive code (validators, the MCP SDK) never meets a 5,000-deep body.
    if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
      done(new HeraldError('invalid_request', `The body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels.`, { title: 'Invalid JSON' }), undefined);
      return;
    }
    parseJson(request, text, (err, body) => {
      if (err) done(err, undefined);
      else done(surrogateError(body) ?? null, body);
    });
  });

  installErrorHandling(app, {
    documentationBase,
    openapiUrl: `${config.publicOrigin}/openapi.json`,
    bodyLimit: config.bodyLimitBytes,
    upgradeUrl: config.upgradeUrl,
  });

  const limiter = new RateLimiter(
    redis,
    config.rateLimitWindowMs,
    config.rateLimitFallbackReplicas,
    (err) => logger.warn({ err }, 'Redis unreachable: rate limiting per replica until it is back'),
    config.namespace,
  );

  // Answer wake-ups: a subscribed Redis connection can do nothing else, so waiters get their own.
  const subscriber = redis.duplicate({ lazyConnect: true });
  subscriber.on('error', () => undefined);
  await subscriber.connect().catch((err: unknown) => logger.warn({ err }, 'Redis unreachable: waits end at their time-out until it is back'));
  const waiters = new Waiters(subscriber, logger, config.namespace);
  app.addHook('onClose', async () => waiters.disconnect());

  // App plugins: who is calling, and liveness, readiness and the drain (callers waiting for an
  // answer get the question as it stands instead of holding up the close).
  await app.register(routeMetrics);
  await app.register(authentication, { config, clients, limiter, logger });
  await app.register(health, { onDrain: () => waiters.wakeAll() });

  // Before the routes: the OpenAPI generator sees each route as it is registered.
  await registerOpenApi(app, config.publicOrigin);
  await registerDocs(app, config.publicOrigin);
  await registerRoutes(app, { config, clients, limiter, waiters, bus });
  return app;
}
