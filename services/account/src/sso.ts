import { isIP } from 'node:net';

import type { Pool } from '@herald/db';
import { hashSecret, isRole, type Role } from '@herald/domain';
import { HeraldError, invalidFields } from '@herald/errors';
import type { Logger } from '@herald/logging';
import type {
  CompleteSsoSignInRequest,
  CompleteSsoSignInResponse,
  DeleteSsoConfigRequest,
  DeleteSsoConfigResponse,
  GetSsoConfigRequest,
  GetSsoConfigResponse,
  PutSsoConfigRequest,
  PutSsoConfigResponse,
  SsoConfig,
  StartSsoSignInRequest,
  StartSsoSignInResponse,
} from '@herald/proto/herald/account/v1/account';
import * as oidc from 'openid-client';

import { addMember, newSession, normaliseEmail, toMemberMessage, type MemberSettings } from './members.js';
import * as store from './store.js';

/**
 * OpenID Connect single sign-on, one provider per workspace (openid-client): the authorization
 * code flow with PKCE, its state and nonce kept server-side for a few minutes, the state also in
 * the browser's pre-sign-in cookie (set by the gateway) so only the browser that started a sign-in
 * can complete it. The provider's answer must verify (issuer, audience, signature, nonce), its
 * email be verified and of an allowed domain, and name a member of the workspace, or become one
 * when the workspace provisions members. The client secret is never answered nor logged.
 */

export interface SsoSettings extends MemberSettings {
  /** Tests and local development: an http issuer on loopback. Everything else must be https. */
  ssoAllowLoopbackHttp: boolean;
}

/** How long a started sign-in can be completed. */
export const SSO_ATTEMPT_TTL_SECONDS = 600;
/** How long a request to the provider may take: less than the gateway's gRPC deadline (5 s), so a silent issuer is a 400 at PUT /sso, not a timeout. */
const PROVIDER_TIMEOUT_SECONDS = 4;
const SCOPE = 'openid email profile';

/** 400 naming one bad field of the configuration (PUT /sso's body). */
const badField = (field: string, problem: string): HeraldError => invalidFields('body', [{ field, in: 'body', problem }]);

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

/** The provider's address as given; refused unless https (or http on loopback when allowed). */
function issuerUrl(issuer: string, allowLoopbackHttp: boolean): URL {
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    throw badField('issuer', 'must be an absolute URL');
  }
  const loopback = LOOPBACK_NAMES.has(url.hostname) || (isIP(url.hostname) === 4 && url.hostname.startsWith('127.'));
  if (url.protocol !== 'https:' && !(allowLoopbackHttp && url.protocol === 'http:' && loopback)) {
    throw badField('issuer', 'must be an https URL');
  }
  if (url.username || url.password || url.search || url.hash) throw badField('issuer', 'must not carry credentials, a query or a fragment');
  return url;
}

const redirectUriOf = (publicOrigin: string): string => `${publicOrigin}/sign-in/sso/callback`;

function toConfigMessage(row: store.SsoConfigRow, publicOrigin: string): SsoConfig {
  return {
    workspaceId: row.workspace_id,
    issuer: row.issuer,
    clientId: row.client_id,
    allowedDomains: row.allowed_domains,
    autoProvisionRole: row.auto_provision_role ?? '',
    redirectUri: redirectUriOf(publicOrigin),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const noSso = (): HeraldError =>
  new HeraldError('not_found', 'This workspace has no single sign-on configured.', { title: 'No single sign-on', hint: 'Sign in with an email link, or ask an owner or admin to configure single sign-on.' });

const failed = (message: string): HeraldError =>
  new HeraldError('unauthorized', `Single sign-on failed: ${message}`, { title: 'Single sign-on failed', hint: 'Start the sign-in again; if it keeps failing, ask an owner or admin to check the SSO configuration.' });

/** The provider could not be reached or answered nothing usable: 503; any other failure to verify: 401. */
function providerError(err: unknown): HeraldError {
  if (err instanceof HeraldError) return err;
  if (err instanceof oidc.AuthorizationResponseError || err instanceof oidc.ResponseBodyError) {
    return failed(`the identity provider answered "${err.error}".`);
  }
  // A 401 with WWW-Authenticate from the token endpoint: the client's credentials were refused.
  if (err instanceof oidc.WWWAuthenticateChallengeError) {
    return failed(`the identity provider answered "${err.cause[0]?.parameters.error ?? `HTTP ${err.status}`}".`);
  }
  if (err instanceof oidc.ClientError) {
    const detail = err.cause instanceof Error ? err.cause.message : err.message;
    if (err.code === 'OAUTH_TIMEOUT' || err.code === 'OAUTH_RESPONSE_IS_NOT_CONFORM' || err.code === 'OAUTH_RESPONSE_IS_NOT_JSON') {
      return new HeraldError('unavailable', 'The identity provider could not be reached or did not answer as expected.', { title: 'Identity provider unavailable' });
    }
    return failed(`${detail}.`);
  }
  if (err instanceof TypeError) {
    return new HeraldError('unavailable', 'The identity provider could not be reached.', { title: 'Identity provider unavailable' });
  }
  return failed('the answer could not be verified.');
}

export function ssoHandlers(pool: Pool, logger: Logger, settings: SsoSettings) {
  const redirectUri = redirectUriOf(settings.publicOrigin);

  /** The provider's metadata (one discovery request) and this workspace's client at it. */
  async function clientOf(row: Pick<store.SsoConfigRow, 'issuer' | 'client_id' | 'client_secret'>): Promise<oidc.Configuration> {
    const server = issuerUrl(row.issuer, settings.ssoAllowLoopbackHttp);
    return oidc.discovery(server, row.client_id, undefined, oidc.ClientSecretBasic(row.client_secret), {
      timeout: PROVIDER_TIMEOUT_SECONDS,
      execute: server.protocol === 'http:' ? [oidc.allowInsecureRequests] : [],
    });
  }

  async function configOf(workspaceId: string): Promise<store.SsoConfigRow> {
    const row = await store.findSsoConfig(pool, workspaceId);
    if (!row) throw noSso();
    return row;
  }

  /** The member the verified address signs in as, provisioned when the workspace says so. */
  async function memberFor(config: store.SsoConfigRow, email: string, displayName: string): Promise<store.MemberRow> {
    const domain = email.slice(email.lastIndexOf('@') + 1);
    if (config.allowed_domains.length > 0 && !config.allowed_domains.includes(domain)) {
      throw new HeraldError('forbidden', `Addresses at ${domain} may not sign in to this workspace by single sign-on.`, { title: 'Domain not allowed', hint: 'Sign in with an address of an allowed domain, or ask an owner or admin for an invite.' });
    }
    const existing = await store.findMemberByEmail(pool, config.workspace_id, email);
    if (existing) return existing;
    if (!config.auto_provision_role) {
      throw new HeraldError('forbidden', `${email} is not a member of this workspace.`, { title: 'Not a member', hint: 'Ask an owner or admin to invite you.' });
    }
    const member = await addMember(pool, config.workspace_id, { email, displayName, role: config.auto_provision_role }).catch(async (err: unknown) => {
      // Provisioned by a concurrent sign-in of the same address.
      if (err instanceof HeraldError && err.code === 'conflict') return store.findMemberByEmail(pool, config.workspace_id, email);
      throw err;
    });
    if (!member) throw new Error(`member ${email} of ${config.workspace_id} vanished while provisioned`);
    logger.info({ workspaceId: config.workspace_id, memberId: member.id, role: member.role }, 'member provisioned by single sign-on');
    return member;
  }

  return {
    async getSsoConfig({ workspaceId }: GetSsoConfigRequest): Promise<GetSsoConfigResponse> {
      return { config: toConfigMessage(await configOf(workspaceId), settings.publicOrigin) };
    },

    async putSsoConfig({ workspaceId, issuer, clientId, clientSecret, allowedDomains, autoProvisionRole }: PutSsoConfigRequest): Promise<PutSsoConfigResponse> {
      let role: Role | null = null;
      if (autoProvisionRole !== '') {
        if (!isRole(autoProvisionRole) || autoProvisionRole === 'owner') throw badField('autoProvisionRole', 'must be admin, marketer, approver or viewer');
        role = autoProvisionRole;
      }
      const domains = [...new Set(allowedDomains.map((domain) => domain.trim().toLowerCase()))];
      if (role && domains.length === 0) {
        throw badField('allowedDomains', 'must name at least one domain when members are provisioned (otherwise anyone with an account at the provider could join)');
      }
      const secret = clientSecret || (await store.findSsoConfig(pool, workspaceId))?.client_secret;
      if (!secret) throw badField('clientSecret', 'is required when single sign-on is first configured');
      // The provider must answer with its metadata now rather than at the first sign-in.
      await clientOf({ issuer, client_id: clientId, client_secret: secret }).catch((err: unknown) => {
        if (err instanceof HeraldError) throw err;
        throw badField('issuer', `did not answer with its OpenID Connect metadata (${err instanceof Error ? err.message : 'unknown error'})`);
      });
      const { row, created } = await store
        .upsertSsoConfig(pool, { workspaceId, issuer, clientId, clientSecret, allowedDomains: domains, autoProvisionRole: role })
        .catch((err: unknown) => {
          // foreign_key_violation: no such workspace.
          if ((err as { code?: string }).code === '23503') throw new HeraldError('not_found', `No workspace ${workspaceId}.`);
          throw err;
        });
      return { config: toConfigMessage(row, settings.publicOrigin), created };
    },

    async deleteSsoConfig({ workspaceId }: DeleteSsoConfigRequest): Promise<DeleteSsoConfigResponse> {
      if (!(await store.deleteSsoConfig(pool, workspaceId))) throw noSso();
      return {};
    },

    async startSsoSignIn({ workspaceId }: StartSsoSignInRequest): Promise<StartSsoSignInResponse> {
      const client = await clientOf(await configOf(workspaceId)).catch((err: unknown) => {
        throw providerError(err);
      });
      const state = oidc.randomState();
      const nonce = oidc.randomNonce();
      const codeVerifier = oidc.randomPKCECodeVerifier();
      const expiresAt = await store.insertSsoAttempt(pool, { stateHash: hashSecret(state), workspaceId, nonce, codeVerifier, ttlSeconds: SSO_ATTEMPT_TTL_SECONDS });
      const authorizationUrl = oidc.buildAuthorizationUrl(client, {
        redirect_uri: redirectUri,
        scope: SCOPE,
        state,
        nonce,
        code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
      });
      return { authorizationUrl: authorizationUrl.href, state, expiresAt: expiresAt.toISOString() };
    },

    async completeSsoSignIn({ state, callbackQuery }: CompleteSsoSignInRequest): Promise<CompleteSsoSignInResponse> {
      const refused = (message: string): HeraldError => new HeraldError('invalid_request', message, { title: 'Single sign-on not completed', hint: 'Start the sign-in again from the same browser.' });
      const callback = new URL(`${redirectUri}?${callbackQuery}`);
      // The state the provider sends back must be the one this browser's cookie holds (login CSRF).
      if (!state || callback.searchParams.get('state') !== state) throw refused('The sign-in answer does not belong to the sign-in this browser started.');
      const attempt = await store.claimSsoAttempt(pool, hashSecret(state));
      if (!attempt) throw refused('This sign-in is unknown, was completed already or has expired.');
      const config = await configOf(attempt.workspace_id);
      let email: string;
      let displayName: string;
      try {
        const client = await clientOf(config);
        const tokens = await oidc.authorizationCodeGrant(client, callback, {
          pkceCodeVerifier: attempt.code_verifier,
          expectedState: state,
          expectedNonce: attempt.nonce,
          idTokenExpected: true,
        });
        const idClaims = tokens.claims();
        if (!idClaims) throw failed('the identity provider sent no ID token.');
        // Providers that keep scope claims out of the ID token answer them at the userinfo endpoint.
        const claims = typeof idClaims.email === 'string' ? idClaims : await oidc.fetchUserInfo(client, tokens.access_token, idClaims.sub);
        if (typeof claims.email !== 'string' || claims.email === '') throw failed('the identity provider sent no email address.');
        if (claims.email_verified !== true) {
          throw new HeraldError('forbidden', `The identity provider has not verified ${claims.email}.`, { title: 'Email not verified', hint: 'Verify the address with your identity provider, then sign in again.' });
        }
        email = normaliseEmail(claims.email);
        displayName = typeof claims.name === 'string' ? claims.name.slice(0, 200) : '';
      } catch (err) {
        throw providerError(err);
      }
      const member = await memberFor(config, email, displayName);
      const { sessionId, session } = newSession(settings);
      const opened = await store.openSession(pool, member.id, session);
      if (opened.state !== 'signed_in') throw new HeraldError('forbidden', `${email} is no longer a member of this workspace.`, { title: 'Not a member', hint: 'Ask an owner or admin to invite you.' });
      logger.info({ workspaceId: member.workspace_id, memberId: member.id }, 'member signed in by single sign-on');
      return { sessionId, member: toMemberMessage(opened.member), expiresAt: opened.expiresAt.toISOString() };
    },
  };
}
