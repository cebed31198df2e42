import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ROLES } from '@herald/domain';
import type { SsoConfig } from '@herald/proto/herald/account/v1/account';
import { Type } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import type { GatewayConfig } from '../config.js';
import { renderSignInPage, sendFormPage } from '../html.js';
import type { RateLimiter } from '../rate-limit.js';
import { Nullable, orNull, withErrors } from '../schemas/common.js';
import { cookieIsSecure, cookieValue, limitSignInAttempts, setSessionCookie } from '../sessions.js';

/**
 * OpenID Connect single sign-on, one provider per workspace:
 *   GET/PUT/DELETE {base}/sso             the workspace's configuration (owners and admins; the
 *                                         client secret goes in, never out)
 *   GET /sign-in/sso/{workspaceId}        starts a sign-in: the pre-sign-in cookie, then the provider
 *   GET /sign-in/sso/callback             where the provider sends the browser back: a session
 * The account service runs the flow (code flow with PKCE, state and nonce); the gateway only binds
 * the attempt to the browser with the `herald_sso` cookie and sets the session cookie.
 */

export interface SsoRouteOptions {
  clients: ServiceClients;
  config: GatewayConfig;
  limiter: RateLimiter;
}

const access = { scope: 'members' } as const;
const SSO_COOKIE = 'herald_sso';
const SSO_COOKIE_PATH = '/sign-in/sso';
const PROVISIONED_ROLES = ROLES.filter((role) => role !== 'owner');

const Domain = Type.String({ minLength: 3, maxLength: 253, pattern: '^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)+[A-Za-z0-9-]{2,63}$' });
const ProvisionedRole = Type.Union(PROVISIONED_ROLES.map((role) => Type.Literal(role)));

const SsoConfigRecord = Type.Object({
  issuer: Type.String({ description: "The provider's issuer identifier (its discovery document is at {issuer}/.well-known/openid-configuration)" }),
  clientId: Type.String(),
  allowedDomains: Type.Array(Type.String(), { description: 'Email domains that may sign in by SSO; empty: any (for existing members)' }),
  // The role an unknown address of an allowed domain joins with; null: only existing members sign in.
  autoProvisionRole: Nullable(ProvisionedRole),
  redirectUri: Type.String({ description: 'Register it at the provider as the redirect URI of the client' }),
  signInUrl: Type.String({ description: "Where members start a sign-in through the workspace's provider" }),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});

const SsoConfigBody = Type.Object(
  {
    issuer: Type.String({ minLength: 8, maxLength: 2_048, pattern: '^https?://', description: 'https (http only on loopback where the operator allows it)' }),
    clientId: Type.String({ minLength: 1, maxLength: 255 }),
    clientSecret: Type.Optional(Type.String({ minLength: 1, maxLength: 1_024, description: 'Written, never shown again; omitted: the stored one is kept' })),
    allowedDomains: Type.Optional(Type.Array(Domain, { maxItems: 50 })),
    autoProvisionRole: Type.Optional(Nullable(ProvisionedRole)),
  },
  { additionalProperties: false },
);

function ssoConfigRecord(config: SsoConfig | undefined, publicOrigin: string) {
  if (!config) throw new Error('account service returned no SSO configuration');
  return {
    issuer: config.issuer,
    clientId: config.clientId,
    allowedDomains: config.allowedDomains,
    autoProvisionRole: orNull(config.autoProvisionRole) as (typeof PROVISIONED_ROLES)[number] | null,
    redirectUri: config.redirectUri,
    signInUrl: `${publicOrigin}${SSO_COOKIE_PATH}/${config.workspaceId}`,
    createdAt: config.createdAt,
    updatedAt: config.updatedAt,
  };
}

export const ssoConfigRoutes =
  ({ clients, config }: Pick<SsoRouteOptions, 'clients' | 'config'>): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.get(
      '/sso',
      { config: { access }, schema: { tags: ['Members'], operationId: 'getSsoConfig', summary: "The workspace's single sign-on configuration (never its client secret)", response: withErrors({ 200: SsoConfigRecord }) } },
      async (request) => ssoConfigRecord((await clients.account.getSsoConfig({ workspaceId: principalOf(request).workspaceId })).config, config.publicOrigin),
    );

    app.put(
      '/sso',
      {
        config: { access },
        schema: {
          tags: ['Members'],
          operationId: 'putSsoConfig',
          summary: 'Configure single sign-on through an OpenID Connect provider (201 when new, 200 when replaced); the issuer is discovered before it is saved',
          body: SsoConfigBody,
          response: withErrors({ 200: SsoConfigRecord, 201: SsoConfigRecord }),
        },
      },
      async (request, reply) => {
        const { issuer, clientId, clientSecret, allowedDomains, autoProvisionRole } = request.body;
        const { config: saved, created } = await clients.account.putSsoConfig({
          workspaceId: principalOf(request).workspaceId,
          issuer,
          clientId,
          clientSecret: clientSecret ?? '',
          allowedDomains: allowedDomains ?? [],
          autoProvisionRole: autoProvisionRole ?? '',
        });
        return reply.code(created ? 201 : 200).send(ssoConfigRecord(saved, config.publicOrigin));
      },
    );

    app.delete(
      '/sso',
      { config: { access }, schema: { tags: ['Members'], operationId: 'deleteSsoConfig', summary: 'Turn single sign-on off (its pending sign-ins fail)', response: withErrors({ 204: Type.Null({ description: 'No content' }) }) } },
      async (request, reply) => {
        await clients.account.deleteSsoConfig({ workspaceId: principalOf(request).workspaceId });
        return reply.code(204).send(null);
      },
    );
  };

const Callback = Type.Object({
  code: Type.Optional(Type.String({ maxLength: 2_048 })),
  state: Type.Optional(Type.String({ maxLength: 256 })),
  iss: Type.Optional(Type.String({ maxLength: 2_048 })),
  error: Type.Optional(Type.String({ maxLength: 256 })),
  error_description: Type.Optional(Type.String({ maxLength: 1_024 })),
});

export const ssoSignInRoutes =
  ({ clients, config, limiter }: SsoRouteOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    const secure = cookieIsSecure(config.publicOrigin);
    const ssoCookie = (value: string, expires: string) =>
      `${SSO_COOKIE}=${value}; Path=${SSO_COOKIE_PATH}; HttpOnly; SameSite=Lax; ${expires}${secure ? '; Secure' : ''}`;

    app.get(
      `${SSO_COOKIE_PATH}/callback`,
      { config: { access: { public: true } }, schema: { querystring: Callback } },
      async (request, reply) => {
        await limitSignInAttempts(limiter, request, reply, config.signInIpRateLimitPerMinute);
        // An attempt is completed once, whatever the outcome: its cookie goes either way.
        void reply.header('cache-control', 'no-store').header('set-cookie', ssoCookie('', 'Max-Age=0'));
        const query = request.url.indexOf('?');
        const signedIn = await clients.account.completeSsoSignIn({
          state: cookieValue(request, SSO_COOKIE) ?? '',
          callbackQuery: query < 0 ? '' : request.url.slice(query + 1),
        });
        if (!signedIn.member) throw new Error('account service returned no member');
        setSessionCookie(reply, signedIn.sessionId, signedIn.expiresAt, secure);
        return sendFormPage(reply, 200, renderSignInPage({ heading: 'You are signed in', text: `Signed in as ${signedIn.member.email}.`, next: { href: '/console/', text: 'Open the Herald Console' } }));
      },
    );

    app.get(
      `${SSO_COOKIE_PATH}/:workspaceId`,
      { config: { access: { public: true } }, schema: { params: Type.Object({ workspaceId: Type.String({ minLength: 1, maxLength: 64 }) }) } },
      async (request, reply) => {
        await limitSignInAttempts(limiter, request, reply, config.signInIpRateLimitPerMinute);
        const { authorizationUrl, state, expiresAt } = await clients.account.startSsoSignIn({ workspaceId: request.params.workspaceId });
        return reply
          .header('cache-control', 'no-store')
          .header('set-cookie', ssoCookie(state, `Expires=${new Date(expiresAt).toUTCString()}`))
          .redirect(authorizationUrl, 302);
      },
    );
  };
