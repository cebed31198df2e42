import { randomUUID } from 'node:crypto';

import { parseKey } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import type { Logger } from '@herald/logging';
import type { Principal } from '@herald/proto/herald/account/v1/account';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Ajv } from 'ajv';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';

import { assertAccess } from './access.js';
import type { ServiceClients } from './clients.js';
import type { GatewayConfig } from './config.js';
import { registerDocs } from './docs.js';
import { clientErrors, frameworkErrors, installErrorHandling } from './errors.js';
import { MachineReporter } from './machines.js';
import { Jwks } from './oauth/jwks.js';
import { AccessTokens, bearerChallenge, isJwtShaped, resourceMetadataUrl } from './oauth/tokens.js';
import { mcpRoutes } from './mcp/server.js';
import { registerOpenApi } from './openapi.js';
import { PrincipalCache } from './principals.js';
import { enforceRateLimit, RateLimiter } from './rate-limit.js';
import { accountRoutes } from './routes/account.js';
import { answerPageRoutes } from './routes/answer-page.js';
import { askRoutes } from './routes/ask.js';
import { decisionRoutes } from './routes/decisions.js';
import { enrollmentPageRoutes, enrollRoutes } from './routes/enroll.js';
import { keyRoutes } from './routes/keys.js';
import { notificationRoutes } from './routes/notifications.js';
import { policyRoutes } from './routes/policy.js';
import { PUBLIC_PREFIX, publicRoutes } from './routes/public.js';
import { subscriberRoutes } from './routes/subscribers.js';
import { webhookRoutes } from './routes/webhooks.js';
import { siteKeyAuthentication, siteKeyResolver } from './site-keys.js';
import { withoutNul } from './validation.js';
import { Waiters } from './waiters.js';

export const API_PREFIX = '/api/v1/server';

export interface AppDependencies {
  config: GatewayConfig;
  clients: ServiceClients;
  redis: Redis;
  logger: Logger;
}

export type App = FastifyInstance;

const bearerPattern = /^Bearer\s+(\S+)$/i;

export async function buildApp({ config, clients, redis, logger }: AppDependencies): Promise<App> {
  const documentationBase = `${config.publicOrigin}/docs/errors`;
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: config.bodyLimitBytes,
    requestTimeout: config.requestTimeoutMs,
    genReqId: (request) => {
      const supplied = request.headers['x-request-id'];
      return typeof supplied === 'string' && /^[\w.-]{1,128}$/.test(supplied) ? supplied : randomUUID();
    },
    requestIdHeader: false,
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
  const bodyValidator = new Ajv({ allErrors: true, coerceTypes: false, removeAdditional: false, useDefaults: true, strict: false });
  const textValidator = new Ajv({ allErrors: true, coerceTypes: 'array', removeAdditional: false, useDefaults: true, strict: false });
  app.setValidatorCompiler(({ schema, httpPart }) => withoutNul((httpPart === 'body' ? bodyValidator : textValidator).compile(schema)));

  // JSON only: a text/plain body is refused instead of arriving as a string.
  app.removeContentTypeParser('text/plain');

  installErrorHandling(app, {
    documentationBase,
    openapiUrl: `${config.publicOrigin}/openapi.json`,
    bodyLimit: config.bodyLimitBytes,
    upgradeUrl: config.upgradeUrl,
  });

  const principals = new PrincipalCache(clients.account, config.keyCacheTtlMs);
  const limiter = new RateLimiter(
    redis,
    config.rateLimitWindowMs,
    config.rateLimitFallbackReplicas,
    (err) => logger.warn({ err }, 'Redis unreachable: rate limiting per replica until it is back'),
    config.namespace,
  );
  const machines = new MachineReporter(clients.account, logger);
  const resourceMetadata = resourceMetadataUrl(config.publicOrigin);
  // Without an authorization server of its own, a Bearer JWT is refused like any malformed key.
  const accessTokens = config.oauthAuthorizationServer
    ? new AccessTokens(
        new Jwks({
          issuer: config.oauthAuthorizationServer,
          jwksUrl: config.oauthJwksUrl,
          allowLoopbackHttp: config.oauthAllowLoopbackHttp,
          ttlMs: config.oauthJwksTtlMs,
          minRefetchMs: config.oauthJwksMinRefetchMs,
          logger,
        }),
        clients.account,
        { issuer: config.oauthAuthorizationServer, resource: config.publicOrigin, clockSkewSeconds: config.oauthClockSkewSeconds, resourceMetadata, cacheTtlMs: config.keyCacheTtlMs },
      )
    : undefined;

  // Answer wake-ups: a subscribed Redis connection can do nothing else, so waiters get their own.
  const subscriber = redis.duplicate({ lazyConnect: true });
  subscriber.on('error', () => undefined);
  await subscriber.connect().catch((err: unknown) => logger.warn({ err }, 'Redis unreachable: waits end at their time-out until it is back'));
  const waiters = new Waiters(subscriber, redis, logger);
  app.addHook('onClose', async () => waiters.disconnect());

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    const access = request.routeOptions.config.access;
    if (!access || !('scope' in access)) return;

    const match = bearerPattern.exec(request.headers.authorization ?? '');
    if (!match?.[1]) {
      throw new HeraldError('unauthorized', 'Missing API key. Send it as a Bearer token: "Authorization: Bearer pk_<id>.<secret>".', {
        title: 'Unauthorized',
      });
    }
    const token = accessTokens && isJwtShaped(match[1]) ? match[1] : undefined;
    const principal = token && accessTokens ? await accessTokens.authenticate(token, reply) : await keyPrincipal(match[1]);
    request.principal = principal;

    await enforceRateLimit(limiter, reply, principal.keyId, principal.plan?.rateLimitPerMinute ?? 0);
    try {
      assertAccess(principal, access, config.upgradeUrl, token !== undefined);
    } catch (err) {
      // RFC 6750 §3.1: tells an OAuth client which scope to ask the authorization server for.
      if (token && err instanceof HeraldError && err.code === 'forbidden') void reply.header('www-authenticate', bearerChallenge(resourceMetadata, 'insufficient_scope', access.scope));
      throw err;
    }
    await machines.report(request, principal);
  });

  async function keyPrincipal(bearer: string): Promise<Principal> {
    const parsed = parseKey(bearer);
    if (parsed.kind === 'site') {
      throw new HeraldError('unauthorized', 'A site key (pk_<id>) only works on the public browser endpoints; use a full API key.', {
        title: 'Unauthorized',
      });
    }
    if (parsed.kind === 'malformed') {
      throw new HeraldError('unauthorized', 'Malformed API key. Use a Bearer key of the form pk_<id>.<secret>.', { title: 'Unauthorized' });
    }
    return principals.resolve(parsed.id, parsed.secret);
  }

  // The browser SDK's endpoints: site key, Origin and CORS (site-keys.ts).
  const resolveSite = siteKeyResolver(clients.account, config.keyCacheTtlMs);
  app.addHook('onRequest', siteKeyAuthentication({ resolveSite, limiter, allowLocalhostSites: config.allowLocalhostSites, upgradeUrl: config.upgradeUrl }));

  // While draining, each response closes its connection, so kept-alive clients move to another
  // replica and close() is not held up until their sockets time out.
  let draining = false;
  app.addHook('preClose', async () => {
    draining = true;
    // Callers waiting for an answer get the question as it stands now instead of holding up the close.
    waiters.wakeAll();
  });
  app.addHook('onSend', async (_request, reply) => {
    if (draining) reply.header('connection', 'close');
  });

  // Before the routes: the OpenAPI generator sees each route as it is registered.
  await registerOpenApi(app, config.publicOrigin);
  await registerDocs(app, config.publicOrigin);
  await app.register(accountRoutes(clients), { prefix: API_PREFIX });
  await app.register(subscriberRoutes(clients), { prefix: API_PREFIX });
  await app.register(publicRoutes({ clients, config, limiter }), { prefix: PUBLIC_PREFIX });
  await app.register(notificationRoutes(clients), { prefix: API_PREFIX });
  await app.register(policyRoutes(clients), { prefix: API_PREFIX });
  await app.register(webhookRoutes(clients), { prefix: API_PREFIX });
  const questions = { clients, waiters, publicOrigin: config.publicOrigin };
  await app.register(askRoutes(questions), { prefix: API_PREFIX });
  await app.register(decisionRoutes(questions), { prefix: API_PREFIX });
  await app.register(answerPageRoutes({ ...questions, limiter, ipRateLimitPerMinute: config.ipRateLimitPerMinute }));
  await app.register(keyRoutes(clients), { prefix: API_PREFIX });
  await app.register(enrollRoutes(clients), { prefix: API_PREFIX });
  await app.register(enrollmentPageRoutes({ clients, config, limiter }));
  await app.register(
    mcpRoutes({
      publicOrigin: config.publicOrigin,
      apiPrefix: API_PREFIX,
      authorizationServer: config.oauthAuthorizationServer || config.publicOrigin,
      limiter,
      ipRateLimitPerMinute: config.ipRateLimitPerMinute,
    }),
  );
  return app;
}
