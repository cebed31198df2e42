import assert from 'node:assert/strict';
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import { admin, call, createKey, createWorkspace, errorBody, SERVER_API, startStack, type Stack } from '@herald/testkit';

// OAuth 2.0 access tokens (RFC 9068 JWTs) on REST and MCP, end to end: a real gateway, the account
// and decision services, and a strict fake authorization server (RFC 8414 metadata and a JWKS) on
// 127.0.0.1 whose keys, and the tokens they sign, are made here.

const ORIGIN = 'http://localhost:8080';
const RESOURCE_METADATA = `${ORIGIN}/.well-known/oauth-protected-resource`;
const INVALID_TOKEN = `Bearer resource_metadata="${RESOURCE_METADATA}", error="invalid_token"`;
const MIN_REFETCH_MS = 1_000;

interface SigningKey {
  kid: string;
  alg: 'RS256' | 'ES256';
  privateKey: KeyObject;
  publicKey: KeyObject;
}

function signingKey(kid: string, alg: SigningKey['alg']): SigningKey {
  const pair = alg === 'RS256' ? generateKeyPairSync('rsa', { modulusLength: 2048 }) : generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { kid, alg, ...pair };
}

/** The authorization server: serves its metadata and JWKS by GET only, and counts every fetch. */
class FakeAuthorizationServer {
  readonly published: SigningKey[] = [];
  readonly fetches = { metadata: 0, jwks: 0 };
  /** When each JWKS fetch arrived (Date.now()). */
  readonly jwksFetchedAt: number[] = [];
  readonly unexpected: string[] = [];
  private server: Server | undefined;
  issuer = '';

  async start(): Promise<void> {
    this.server = createServer((request, response) => this.serve(request, response));
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.issuer = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server?.close(() => resolve()));
  }

  private serve(request: IncomingMessage, response: ServerResponse): void {
    const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
      response.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
    const problem =
      request.method !== 'GET'
        ? `${request.method} is not GET`
        : request.headers.accept !== 'application/json'
          ? `accept is ${request.headers.accept}`
          : request.headers['content-length'] !== undefined
            ? 'a GET with a body'
            : undefined;
    if (problem) {
      this.unexpected.push(`${request.method} ${request.url}: ${problem}`);
      json(400, { error: 'invalid_request' });
      return;
    }
    if (request.url === '/.well-known/oauth-authorization-server') {
      this.fetches.metadata += 1;
      json(200, {
        issuer: this.issuer,
        authorization_endpoint: `${this.issuer}/authorize`,
        token_endpoint: `${this.issuer}/token`,
        jwks_uri: `${this.issuer}/jwks`,
        response_types_supported: ['code'],
      });
    } else if (request.url === '/jwks') {
      this.fetches.jwks += 1;
      this.jwksFetchedAt.push(Date.now());
      const keys = this.published.map(({ kid, alg, publicKey }) => ({ ...publicKey.export({ format: 'jwk' }), kid, alg, use: 'sig' }));
      json(200, { keys }, { 'cache-control': 'public, max-age=300' });
    } else {
      this.unexpected.push(`GET ${request.url}: unknown path`);
      json(404, { error: 'not_found' });
    }
  }
}

const segment = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

interface TokenOptions {
  key?: SigningKey;
  header?: Record<string, unknown>;
  claims?: Record<string, unknown>;
}

let authorizationServer: FakeAuthorizationServer;
let rsa: SigningKey;
let ec: SigningKey;
let stack: Stack;

/** An access token as the authorization server issues it for `keyId`; options override any part. */
function accessToken(keyId: string, { key = rsa, header = {}, claims = {} }: TokenOptions = {}): string {
  const now = Math.floor(Date.now() / 1_000);
  const input = `${segment({ alg: key.alg, typ: 'at+jwt', kid: key.kid, ...header })}.${segment({
    iss: authorizationServer.issuer,
    aud: ORIGIN,
    sub: keyId,
    client_id: 'agent-client',
    iat: now,
    exp: now + 300,
    jti: `${now}-${Math.random()}`,
    scope: 'identity ask',
    ...claims,
  })}`;
  const signature = sign('sha256', Buffer.from(input), key.alg === 'ES256' ? { key: key.privateKey, dsaEncoding: 'ieee-p1363' } : key.privateKey);
  return `${input}.${signature.toString('base64url')}`;
}

before(async () => {
  authorizationServer = new FakeAuthorizationServer();
  await authorizationServer.start();
  rsa = signingKey('rsa-1', 'RS256');
  ec = signingKey('ec-1', 'ES256');
  authorizationServer.published.push(rsa, ec);
  stack = await startStack({
    decisions: true,
    gatewayEnv: {
      OAUTH_AUTHORIZATION_SERVER: authorizationServer.issuer,
      OAUTH_ALLOW_LOOPBACK_HTTP: 'true',
      OAUTH_JWKS_MIN_REFETCH_MS: String(MIN_REFETCH_MS),
    },
  });
});
after(async () => {
  await stack.stop();
  await authorizationServer.stop();
  assert.deepEqual(authorizationServer.unexpected, [], 'the gateway only fetched the metadata and the JWKS, by GET');
});

const identity = (bearer: string, url = stack.gatewayUrl) => call(url, `${SERVER_API}/identity`, { key: bearer });

/** A runtime key: identity, account, notifications:send, ask, decisions. */
async function runtimeKey(): Promise<{ keyId: string; apiKey: string }> {
  const { workspaceId } = await createWorkspace();
  return createKey(workspaceId, 'runtime');
}

function assertRefused(response: { status: number; headers: Headers; body: unknown }, message: string): void {
  assert.equal(response.status, 401, `${message}: ${JSON.stringify(response.body)}`);
  assert.equal(response.headers.get('www-authenticate'), INVALID_TOKEN);
  assert.deepEqual(
    response.body,
    errorBody('unauthorized', 401, 'Invalid access token', message, 'Get a new access token from the authorization server, or use an API key.'),
  );
}

test('a valid token (RS256 or ES256) is its key on REST; API keys still work; limits count per key', async () => {
  const { keyId, apiKey } = await runtimeKey();
  const byKey = await identity(apiKey);
  assert.equal(byKey.status, 200, JSON.stringify(byKey.body));

  const byToken = await identity(accessToken(keyId));
  assert.equal(byToken.status, 200, JSON.stringify(byToken.body));
  assert.deepEqual(byToken.body, byKey.body);
  assert.equal(byToken.headers.get('www-authenticate'), null);
  // One rate-limit budget for the key, whether it is presented itself or through a token.
  assert.equal(Number(byToken.headers.get('x-ratelimit-remaining')), Number(byKey.headers.get('x-ratelimit-remaining')) - 1);

  const byEc = await identity(accessToken(keyId, { key: ec, header: { typ: 'JWT' }, claims: { aud: ['https://other.example', ORIGIN] } }));
  assert.equal(byEc.status, 200, JSON.stringify(byEc.body));
  assert.deepEqual(byEc.body, byKey.body);

  // herald_key_id names the key when sub is the person's id at the authorization server.
  const byClaim = await identity(accessToken(keyId, { claims: { sub: 'user-4711', herald_key_id: keyId } }));
  assert.equal(byClaim.status, 200, JSON.stringify(byClaim.body));

  // Discovered once through RFC 8414 metadata; the JWKS was fetched once and is cached (max-age=300).
  assert.equal(authorizationServer.fetches.metadata, 1);
  assert.equal(authorizationServer.fetches.jwks, 1);
});

test('a token works on an MCP tool call through the official client', async () => {
  const { keyId } = await runtimeKey();
  const client = new Client({ name: 'herald-oauth-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${stack.gatewayUrl}/api/mcp/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${accessToken(keyId)}` } },
  });
  await client.connect(transport);
  try {
    const result = (await client.callTool({ name: 'ask_user', arguments: { question: 'Deploy with an OAuth token?', wait: false } })) as CallToolResult;
    assert.equal(result.isError, undefined, JSON.stringify(result.content));
    assert.equal((result.structuredContent as { status?: string }).status, 'pending');
  } finally {
    await client.close();
  }

  // A bad token on MCP is the same 401 and challenge as on REST.
  const expired = accessToken(keyId, { claims: { exp: Math.floor(Date.now() / 1_000) - 3_600 } });
  const refused = await call(stack.gatewayUrl, '/api/mcp/mcp', {
    method: 'POST',
    key: expired,
    headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
    body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'ask_user', arguments: { question: 'Still?' } } },
  });
  assertRefused(refused, 'The access token has expired.');
});

test('wrong issuer, audience, times, signature, typ, alg none and HS256 are 401 invalid_token', async () => {
  const { keyId } = await runtimeKey();
  const now = Math.floor(Date.now() / 1_000);
  const cases: [string, string][] = [
    [accessToken(keyId, { claims: { iss: 'https://evil.example' } }), `The access token was not issued by ${authorizationServer.issuer}.`],
    [accessToken(keyId, { claims: { aud: 'https://other.example' } }), `The access token's audience does not include ${ORIGIN}.`],
    [accessToken(keyId, { claims: { aud: undefined } }), `The access token's audience does not include ${ORIGIN}.`],
    [accessToken(keyId, { claims: { iat: now - 600, exp: now - 61 } }), 'The access token has expired.'],
    [accessToken(keyId, { claims: { nbf: now + 300 } }), 'The access token is not valid yet (nbf).'],
    [accessToken(keyId, { claims: { iat: now + 300 } }), "The access token's iat is missing or in the future."],
    [accessToken(keyId, { claims: { scope: undefined } }), 'The access token has no scope claim.'],
    [accessToken(keyId, { claims: { sub: 'user-4711' } }), 'The access token names no Herald key id (herald_key_id or sub).'],
    [accessToken(keyId, { header: { typ: 'id+jwt' } }), 'The access token\'s typ must be "at+jwt" (RFC 9068) or "JWT".'],
    [accessToken(keyId, { header: { crit: ['exp'] } }), 'The access token has critical header parameters Herald does not understand.'],
    // Signed by another key under a published kid.
    [accessToken(keyId, { key: signingKey('rsa-1', 'RS256') }), "The access token's signature is not valid."],
    // An ES256 kid claimed for an RS256 signature.
    [accessToken(keyId, { key: { ...rsa, kid: 'ec-1' } }), `Signing key "ec-1" is not for RS256.`],
  ];
  for (const [token, message] of cases) assertRefused(await identity(token), message);

  const unsigned = `${segment({ alg: 'none', typ: 'at+jwt', kid: 'rsa-1' })}.${accessToken(keyId).split('.')[1]}.`;
  assertRefused(await identity(unsigned), 'The access token\'s alg "none" is not accepted; it must be an asymmetric signature such as RS256 or ES256.');
  const hmac = `${segment({ alg: 'HS256', typ: 'at+jwt', kid: 'rsa-1' })}.${accessToken(keyId).split('.')[1]}.c2lnbmF0dXJl`;
  assertRefused(await identity(hmac), 'The access token\'s alg "HS256" is not accepted; it must be an asymmetric signature such as RS256 or ES256.');
});

/**
 * Presents a fresh token from `mint` every 50 ms until `done` says yes to the response; each one
 * before that must be refused with `message`. The gateway refetches the JWKS for an unknown kid at
 * most once per MIN_REFETCH_MS, so this is how long a key the gateway has not seen yet stays
 * refused. (Fresh: the gateway remembers a refused token for KEY_CACHE_TTL_MS.)
 */
async function presentUntil(mint: () => string, message: string, done: (response: { status: number }) => boolean) {
  const started = Date.now();
  for (;;) {
    const response = await identity(mint());
    if (done(response)) return response;
    assertRefused(response, message);
    assert.ok(Date.now() - started < MIN_REFETCH_MS + 5_000, `${message}: still so after ${Date.now() - started} ms`);
    await sleep(50);
  }
}

test('an unknown kid refetches the JWKS once (rate-limited), so rotated keys work', async () => {
  const { keyId } = await runtimeKey();
  // An unknown kid refetches once the window since the last fetch (an earlier test's) has passed.
  const before = authorizationServer.fetches.jwks;
  const ghost = 'The authorization server has no signing key "ghost-1".';
  const ghostKey = signingKey('ghost-1', 'ES256');
  assertRefused(await presentUntil(() => accessToken(keyId, { key: ghostKey }), ghost, () => authorizationServer.fetches.jwks > before), ghost);
  assert.equal(authorizationServer.fetches.jwks, before + 1);
  // Within OAUTH_JWKS_MIN_REFETCH_MS another unknown kid does not fetch again.
  assertRefused(await identity(accessToken(keyId, { key: signingKey('ghost-2', 'ES256') })), 'The authorization server has no signing key "ghost-2".');
  assert.equal(authorizationServer.fetches.jwks, before + 1);

  // A rotated key is refused until the window has passed, then found by the one refetch it makes.
  const rotated = signingKey('rsa-2', 'RS256');
  authorizationServer.published.push(rotated);
  const response = await presentUntil(() => accessToken(keyId, { key: rotated }), 'The authorization server has no signing key "rsa-2".', ({ status }) => status !== 401);
  assert.equal(response.status, 200, JSON.stringify(response.body));
  assert.equal(authorizationServer.fetches.jwks, before + 2);
  const [ghostFetch, rotatedFetch] = authorizationServer.jwksFetchedAt.slice(-2) as [number, number];
  assert.ok(rotatedFetch - ghostFetch >= MIN_REFETCH_MS, `refetched ${rotatedFetch - ghostFetch} ms after the last fetch`);
  assert.equal(authorizationServer.fetches.metadata, 1);
});

test('a token naming a revoked or unknown key is 401', async () => {
  const { keyId } = await runtimeKey();
  await admin('key', 'revoke', '--key', keyId);
  assertRefused(await identity(accessToken(keyId)), 'The access token names an API key that is unknown, revoked or expired.');
  assertRefused(await identity(accessToken('a'.repeat(16))), 'The access token names an API key that is unknown, revoked or expired.');
});

test("a token's scope narrows its key's and can never widen it: 403 with the insufficient_scope challenge", async () => {
  const { keyId } = await runtimeKey();
  const ask = (bearer: string) => call(stack.gatewayUrl, `${SERVER_API}/ask`, { method: 'POST', key: bearer, body: { question: 'Deploy?', wait: false } });

  const narrowed = await ask(accessToken(keyId, { claims: { scope: 'identity' } }));
  assert.equal(narrowed.status, 403, JSON.stringify(narrowed.body));
  assert.equal(narrowed.headers.get('www-authenticate'), `Bearer resource_metadata="${RESOURCE_METADATA}", error="insufficient_scope", scope="ask"`);
  assert.deepEqual(
    narrowed.body,
    errorBody(
      'forbidden',
      403,
      'This key cannot access this endpoint',
      'This key cannot access this endpoint',
      'The access token\'s scope does not allow "ask" (or its key of origin "runtime" cannot call this endpoint).',
    ),
  );
  assert.equal((await ask(accessToken(keyId, { claims: { scope: 'identity ask' } }))).status, 200);

  // A runtime key has no "webhooks" scope, whatever the token says; a dashboard key's token may ask for it.
  const secret = (bearer: string) => call(stack.gatewayUrl, `${SERVER_API}/webhooks/secret`, { key: bearer });
  const widened = await secret(accessToken(keyId, { claims: { scope: 'identity ask webhooks' } }));
  assert.equal(widened.status, 403, JSON.stringify(widened.body));
  assert.equal((widened.body as { message?: string }).message, 'This key cannot access this endpoint');
  const { workspaceId } = await createWorkspace();
  const dashboard = await createKey(workspaceId, 'dashboard');
  assert.equal((await secret(accessToken(dashboard.keyId, { claims: { scope: 'identity' } }))).status, 403);
  const granted = await secret(accessToken(dashboard.keyId, { claims: { scope: 'webhooks' } }));
  assert.equal(granted.status, 200, JSON.stringify(granted.body));
});

test('without an authorization server configured, a Bearer JWT is refused like a malformed key', async () => {
  const { keyId } = await runtimeKey();
  const plain = await stack.addGateway();
  const response = await identity(accessToken(keyId), plain);
  assert.equal(response.status, 401);
  assert.equal(response.headers.get('www-authenticate'), null);
  assert.equal((response.body as { message?: string }).message, 'Malformed API key. Use a Bearer key of the form pk_<id>.<secret>.');
});
