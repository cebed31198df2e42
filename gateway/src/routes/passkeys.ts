import { readFileSync } from 'node:fs';

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Passkey } from '@herald/proto/herald/account/v1/account';
import { Type } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import type { GatewayConfig } from '../config.js';
import { PAGE_HEAD, sendTokenPage, SIGN_IN_PAGE_STYLE } from '../html.js';
import { API_PREFIX } from '../prefixes.js';
import type { RateLimiter } from '../rate-limit.js';
import { memberRecord, MemberRecord } from '../schemas/members.js';
import { ErrorResponse, Nullable, orNull, withErrors } from '../schemas/common.js';
import { assertSameOrigin, cookieIsSecure, limitSignInAttempts, sessionOf, setSessionCookie } from '../sessions.js';
import { StaticBody } from '../static-body.js';

/**
 * Passkeys (WebAuthn; the ceremonies are checked by the account service):
 *   POST {base}/sign-in/passkey/options   options for a usernameless sign-in (limited per IP)
 *   POST {base}/sign-in/passkey           verifies the assertion, opens a session (herald_session)
 *   POST {base}/me/passkeys/options       options to register one (signed-in member, CSRF)
 *   POST {base}/me/passkeys               verifies and stores it
 *   GET  {base}/me/passkeys               the member's passkeys
 *   DELETE {base}/me/passkeys/{passkeyId} deletes one
 *   GET  /passkeys                        a minimal page doing all of it (script files, strict CSP)
 * The relying party is PUBLIC_ORIGIN: its host is the RP id, the browser must report that origin.
 */

export interface PasskeyRouteOptions {
  clients: ServiceClients;
  config: GatewayConfig;
  limiter: RateLimiter;
}

const Base64Url = (maxLength: number, description?: string) =>
  Type.String({ minLength: 1, maxLength, pattern: '^[A-Za-z0-9_-]+$', ...(description ? { description } : {}) });

/** What @simplewebauthn/browser's startRegistration / startAuthentication return (RegistrationResponseJSON, AuthenticationResponseJSON). */
const credentialFields = {
  id: Base64Url(1_366, 'The credential id'),
  rawId: Base64Url(1_366),
  type: Type.Literal('public-key'),
  authenticatorAttachment: Type.Optional(Type.Union([Type.Literal('platform'), Type.Literal('cross-platform')])),
  clientExtensionResults: Type.Object({}, { additionalProperties: true, maxProperties: 20 }),
};

const RegistrationCredential = Type.Object(
  {
    ...credentialFields,
    response: Type.Object(
      {
        clientDataJSON: Base64Url(4_096),
        attestationObject: Base64Url(32_768),
        authenticatorData: Type.Optional(Base64Url(32_768)),
        transports: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 32 }), { maxItems: 10 })),
        publicKeyAlgorithm: Type.Optional(Type.Integer()),
        publicKey: Type.Optional(Base64Url(8_192)),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false, description: 'RegistrationResponseJSON (navigator.credentials.create, as @simplewebauthn/browser returns it)' },
);

const AuthenticationCredential = Type.Object(
  {
    ...credentialFields,
    response: Type.Object(
      {
        clientDataJSON: Base64Url(4_096),
        authenticatorData: Base64Url(32_768),
        // ML-DSA-44 (offered first, post-quantum) signs in 2,420 bytes.
        signature: Base64Url(8_192),
        userHandle: Type.Optional(Base64Url(128)),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false, description: 'AuthenticationResponseJSON (navigator.credentials.get, as @simplewebauthn/browser returns it)' },
);

const Options = (description: string) =>
  Type.Object(
    { options: Type.Object({ challenge: Type.String({ description: 'base64url; single use, valid for PASSKEY_CHALLENGE_TTL_SECONDS' }) }, { additionalProperties: true, description }) },
    { additionalProperties: false },
  );

const PasskeyRecord = Type.Object({
  id: Type.String(),
  name: Type.String(),
  transports: Type.Array(Type.String()),
  deviceType: Type.Union([Type.Literal('singleDevice'), Type.Literal('multiDevice')], { description: 'multiDevice: a synced passkey' }),
  backedUp: Type.Boolean(),
  createdAt: Type.String(),
  lastUsedAt: Nullable(Type.String()),
});

function passkeyRecord(passkey: Passkey | undefined) {
  if (!passkey) throw new Error('account service returned no passkey');
  return {
    id: passkey.id,
    name: passkey.name,
    transports: passkey.transports,
    deviceType: passkey.deviceType as 'singleDevice' | 'multiDevice',
    backedUp: passkey.backedUp,
    createdAt: passkey.createdAt,
    lastUsedAt: orNull(passkey.lastUsedAt),
  };
}

const EmptyBody = Type.Object({}, { additionalProperties: false });

/** Passkey ceremonies post a credential of a few KB. */
const bodyLimit = 65_536;

export const passkeyRoutes =
  ({ clients, config, limiter }: PasskeyRouteOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    const secure = cookieIsSecure(config.publicOrigin);
    const origin = new URL(config.publicOrigin).origin;
    const access = { scope: 'me' } as const;
    const tags = ['Members'];

    app.post(
      '/sign-in/passkey/options',
      {
        bodyLimit,
        config: { access: { public: true } },
        schema: {
          tags,
          operationId: 'startPasskeySignIn',
          summary: 'Options for signing in with a passkey (discoverable credentials: no address asked)',
          body: EmptyBody,
          response: withErrors({ 200: Options('PublicKeyCredentialRequestOptionsJSON, for startAuthentication of @simplewebauthn/browser') }),
        },
      },
      async (request, reply) => {
        await limitSignInAttempts(limiter, request, reply, config.signInIpRateLimitPerMinute);
        const { optionsJson } = await clients.account.startPasskeySignIn({ origin });
        return { options: JSON.parse(optionsJson) as { challenge: string } };
      },
    );

    app.post(
      '/sign-in/passkey',
      {
        bodyLimit,
        config: { access: { public: true } },
        schema: {
          tags,
          operationId: 'signInWithPasskey',
          summary: 'Sign in with a passkey: opens a session (the herald_session cookie), as an email link does',
          body: Type.Object({ credential: AuthenticationCredential }, { additionalProperties: false }),
          response: withErrors({ 200: Type.Object({ member: MemberRecord, expiresAt: Type.String({ description: "The session's absolute expiry" }) }) }),
        },
      },
      async (request, reply) => {
        // Only this origin's pages sign a browser in (login CSRF).
        assertSameOrigin(request, config.publicOrigin);
        await limitSignInAttempts(limiter, request, reply, config.signInIpRateLimitPerMinute);
        const signedIn = await clients.account.finishPasskeySignIn({ origin, responseJson: JSON.stringify(request.body.credential) });
        setSessionCookie(reply, signedIn.sessionId, signedIn.expiresAt, secure);
        return { member: memberRecord(signedIn.member), expiresAt: signedIn.expiresAt };
      },
    );

    app.post(
      '/me/passkeys/options',
      {
        bodyLimit,
        config: { access },
        schema: {
          tags,
          operationId: 'startPasskeyRegistration',
          summary: 'Options for registering a passkey (sessions only; the challenge is good for this session only)',
          body: EmptyBody,
          response: withErrors({ 200: Options('PublicKeyCredentialCreationOptionsJSON, for startRegistration of @simplewebauthn/browser'), 409: ErrorResponse }),
        },
      },
      async (request) => {
        const session = sessionOf(request);
        const { optionsJson } = await clients.account.startPasskeyRegistration({
          workspaceId: principalOf(request).workspaceId,
          memberId: session.member.id,
          sessionId: session.id,
          origin,
        });
        return { options: JSON.parse(optionsJson) as { challenge: string } };
      },
    );

    app.post(
      '/me/passkeys',
      {
        bodyLimit,
        config: { access },
        schema: {
          tags,
          operationId: 'registerPasskey',
          summary: 'Register a passkey for the signed-in member (sessions only)',
          body: Type.Object(
            { name: Type.Optional(Type.String({ maxLength: 100, description: 'How the member recognises it; default "Passkey"' })), credential: RegistrationCredential },
            { additionalProperties: false },
          ),
          response: withErrors({ 201: Type.Object({ passkey: PasskeyRecord }), 409: ErrorResponse }),
        },
      },
      async (request, reply) => {
        const session = sessionOf(request);
        const { passkey } = await clients.account.finishPasskeyRegistration({
          workspaceId: principalOf(request).workspaceId,
          memberId: session.member.id,
          sessionId: session.id,
          origin,
          responseJson: JSON.stringify(request.body.credential),
          name: request.body.name ?? '',
        });
        return reply.code(201).send({ passkey: passkeyRecord(passkey) });
      },
    );

    app.get(
      '/me/passkeys',
      { config: { access }, schema: { tags, operationId: 'listPasskeys', summary: "The signed-in member's passkeys (sessions only)", response: withErrors({ 200: Type.Object({ passkeys: Type.Array(PasskeyRecord) }) }) } },
      async (request) => {
        const { passkeys } = await clients.account.listPasskeys({ workspaceId: principalOf(request).workspaceId, memberId: sessionOf(request).member.id });
        return { passkeys: passkeys.map(passkeyRecord) };
      },
    );

    app.delete(
      '/me/passkeys/:passkeyId',
      {
        config: { access },
        schema: {
          tags,
          operationId: 'deletePasskey',
          summary: 'Delete one of your passkeys (sessions only)',
          params: Type.Object({ passkeyId: Type.String({ minLength: 1, maxLength: 64 }) }),
          response: withErrors({ 200: Type.Object({ passkey: PasskeyRecord }) }),
        },
      },
      async (request) => {
        const { passkey } = await clients.account.deletePasskey({
          workspaceId: principalOf(request).workspaceId,
          memberId: sessionOf(request).member.id,
          passkeyId: request.params.passkeyId,
        });
        return { passkey: passkeyRecord(passkey) };
      },
    );
  };

const PAGE_CSP = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

const PAGE = `${PAGE_HEAD}<title>Passkeys · Herald</title>
<style>
${SIGN_IN_PAGE_STYLE}
  button.secondary { background: transparent; color: inherit; border: 1px solid currentColor; min-height: 2.5rem; padding: .25rem .75rem; }
  input { font: inherit; width: 100%; box-sizing: border-box; padding: .5rem; margin: .25rem 0 .75rem; }
  ul { padding: 0; list-style: none; } li { display: flex; gap: .5rem; justify-content: space-between; align-items: center; margin: .5rem 0; }
  .error { color: #d1242f; }
</style>
</head>
<body data-api="${API_PREFIX}">
<main>
  <h1>Passkeys</h1>
  <section id="signed-out" hidden>
    <p>Sign in to Herald with a passkey saved on this device or your phone.</p>
    <button type="button" id="sign-in">Sign in with a passkey</button>
  </section>
  <section id="signed-in" hidden>
    <p>Signed in as <strong id="who"></strong>.</p>
    <h2>Your passkeys</h2>
    <p id="none">You have no passkey yet.</p>
    <ul id="passkeys"></ul>
    <label for="name">Name of a new passkey</label>
    <input id="name" maxlength="100" placeholder="e.g. Laptop">
    <button type="button" id="register">Add a passkey</button>
    <p><button type="button" class="secondary" id="sign-out">Sign out</button></p>
  </section>
  <p id="status" role="status" aria-live="polite"></p>
</main>
<script src="/passkeys/webauthn.js"></script>
<script src="/passkeys/page.js"></script>
</body>
</html>
`;

/** The page's two scripts: @simplewebauthn/browser's bundle and the page's own (gateway/pages/passkeys.js). */
function loadScripts(): { webauthn: StaticBody; page: StaticBody } {
  const script = 'text/javascript; charset=utf-8';
  // The bundle is not in the package's exports: found beside its ESM entry (esm/index.js).
  const bundle = new URL('../dist/bundle/index.umd.min.js', import.meta.resolve('@simplewebauthn/browser'));
  return {
    webauthn: new StaticBody(readFileSync(bundle, 'utf8'), script),
    page: new StaticBody(readFileSync(new URL('../../../pages/passkeys.js', import.meta.url), 'utf8'), script),
  };
}

export const passkeyPageRoutes = (): FastifyPluginAsyncTypebox => async (app) => {
  const scripts = loadScripts();
  const open = { config: { access: { public: true as const } } };
  // No token in its URL: its requests may say where they come from (Origin, not `null`).
  app.get('/passkeys', open, async (_request, reply) => sendTokenPage(reply, 200, PAGE, PAGE_CSP).header('referrer-policy', 'same-origin'));
  app.get('/passkeys/webauthn.js', open, async (request, reply) => scripts.webauthn.send(request, reply.header('x-content-type-options', 'nosniff')));
  app.get('/passkeys/page.js', open, async (request, reply) => scripts.page.send(request, reply.header('x-content-type-options', 'nosniff')));
};
