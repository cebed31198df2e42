import { parseKey } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import type { Logger } from '@herald/logging';
import type { Principal } from '@herald/proto/herald/account/v1/account';
import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

import { assertAccess } from '../access.js';
import type { ServiceClients } from '../clients.js';
import type { GatewayConfig } from '../config.js';
import { MachineReporter } from '../machines.js';
import { Jwks } from '../oauth/jwks.js';
import { AccessTokens, bearerChallenge, isJwtShaped, resourceMetadataUrl } from '../oauth/tokens.js';
import { API_PREFIX } from '../prefixes.js';
import { PrincipalCache } from '../principals.js';
import { enforceRateLimit, type RateLimiter } from '../rate-limit.js';
import { assertCsrf, sessionCookie } from '../sessions.js';
import { siteKeyAuthentication, siteKeyResolver } from '../site-keys.js';

export interface AuthenticationOptions {
  config: GatewayConfig;
  clients: ServiceClients;
  limiter: RateLimiter;
  logger: Logger;
}

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * For a request no route took (a 404 or 405): when it carries a valid key, it is counted and
     * answered like any authenticated request (X-RateLimit headers; 429 over the limit).
     */
    identifyCaller?: (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
    /**
     * For MCP, whose handshake and catalogue need no key: the caller of the request's credential,
     * not counted against any limit; undefined when it sent none; an invalid one is the 401 error
     * REST would answer (so MCP limits it like no credential, per client IP).
     */
    verifyCredential?: (request: FastifyRequest, reply: FastifyReply) => Promise<Principal | HeraldError | undefined>;
  }
}

const bearerPattern = /^Bearer\s+(\S+)$/i;

/**
 * Who is calling. On every route whose config names an access scope: the Bearer API key (or, with
 * an authorization server, an OAuth access token) becomes `request.principal`, the key's
 * per-minute limit is applied (X-RateLimit headers on every response), and the route's access
 * rule is checked. The browser SDK's endpoints authenticate by site key and Origin instead.
 */
export const authentication = fp<AuthenticationOptions>(
  async (app, { config, clients, limiter, logger }) => {
    const principals = new PrincipalCache(clients.account, config.keyCacheTtlMs);
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

    /** The caller of a Bearer credential (an API key, or an access token when an authorization server is configured). */
    async function credentialPrincipal(reply: FastifyReply, bearer: string): Promise<{ principal: Principal; viaToken: boolean }> {
      const viaToken = accessTokens !== undefined && isJwtShaped(bearer);
      return { principal: viaToken && accessTokens ? await accessTokens.authenticate(bearer, reply) : await keyPrincipal(bearer), viaToken };
    }

    /** The caller of a Bearer credential, counted against its per-minute limit. */
    async function authenticate(request: FastifyRequest, reply: FastifyReply, bearer: string): Promise<{ principal: Principal; viaToken: boolean }> {
      const { principal, viaToken } = await credentialPrincipal(reply, bearer);
      request.principal = principal;
      await enforceRateLimit(limiter, reply, principal.keyId, principal.plan?.rateLimitPerMinute ?? 0);
      return { principal, viaToken };
    }

    /**
     * A member's session (no Authorization header, a herald_session cookie): checked by the
     * account service on every request (so a sign-out takes effect at once), CSRF-checked when it
     * changes state, and limited per member like a key.
     */
    async function authenticateSession(request: FastifyRequest, reply: FastifyReply, sessionId: string): Promise<Principal> {
      const { principal, member, csrfToken, workspaceName } = await clients.account.authenticateSession({ sessionId });
      if (!principal || !member) throw new Error('account service returned no principal');
      assertCsrf(request, csrfToken, config.publicOrigin);
      request.principal = principal;
      request.session = { id: sessionId, csrfToken, member, workspaceName };
      await enforceRateLimit(limiter, reply, principal.keyId, principal.plan?.rateLimitPerMinute ?? 0);
      return principal;
    }

    app.addHook('onRequest', async (request, reply) => {
      reply.header('x-request-id', request.id);
      const access = request.routeOptions.config.access;
      if (!access || !('scope' in access)) return;
      const bearer = bearerPattern.exec(request.headers.authorization ?? '')?.[1];
      const sessionId = bearer === undefined ? sessionCookie(request) : undefined;
      if (sessionId !== undefined) {
        assertAccess(await authenticateSession(request, reply, sessionId), access, config.upgradeUrl, false, request.method);
        return;
      }
      if (!bearer) {
        throw new HeraldError('unauthorized', 'Missing API key. Send it as a Bearer token: "Authorization: Bearer pk_<id>.<secret>".', {
          title: 'Unauthorized',
        });
      }
      const { principal, viaToken } = await authenticate(request, reply, bearer);
      try {
        assertAccess(principal, access, config.upgradeUrl, viaToken, request.method);
      } catch (err) {
        // RFC 6750 §3.1: tells an OAuth client which scope to ask the authorization server for.
        if (viaToken && err instanceof HeraldError && err.code === 'forbidden') void reply.header('www-authenticate', bearerChallenge(resourceMetadata, 'insufficient_scope', access.scope));
        throw err;
      }
      await machines.report(request, principal);
    });

    app.decorate('identifyCaller', async (request: FastifyRequest, reply: FastifyReply) => {
      const bearer = bearerPattern.exec(request.headers.authorization ?? '')?.[1];
      if (!bearer || !request.url.startsWith(`${API_PREFIX}/`)) return;
      try {
        await authenticate(request, reply, bearer);
      } catch (err) {
        // A bad key on an unknown path is still a 404; only the limit of a valid key answers here.
        if (err instanceof HeraldError && err.code === 'rate_limited') throw err;
      }
    });

    app.decorate('verifyCredential', async (request: FastifyRequest, reply: FastifyReply) => {
      if (request.headers.authorization === undefined) return undefined;
      const bearer = bearerPattern.exec(request.headers.authorization)?.[1];
      if (!bearer) return new HeraldError('unauthorized', 'Malformed API key. Use a Bearer key of the form pk_<id>.<secret>.', { title: 'Unauthorized' });
      try {
        return (await credentialPrincipal(reply, bearer)).principal;
      } catch (err) {
        if (err instanceof HeraldError && err.code === 'unauthorized') return err;
        throw err;
      }
    });

    // The browser SDK's endpoints: site key, Origin and CORS (site-keys.ts).
    const resolveSite = siteKeyResolver(clients.account, config.keyCacheTtlMs);
    const hostedOrigin = new URL(config.publicOrigin).origin;
    app.addHook(
      'onRequest',
      siteKeyAuthentication({ resolveSite, limiter, allowLocalhostSites: config.allowLocalhostSites, upgradeUrl: config.upgradeUrl, hostedOrigin }),
    );
  },
  { name: 'herald-authentication' },
);
