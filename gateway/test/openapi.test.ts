import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { createKafkaBus, type Bus } from '@herald/bus';
import { loadConfig } from '@herald/config';
import { createLogger } from '@herald/logging';
import { call, startStack, type Stack } from '@herald/testkit';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Redis } from 'ioredis';
import { parse as parseYaml } from 'yaml';

import { buildApp, type App } from '../src/app.js';
import { closeServiceClients, createServiceClients, type ServiceClients } from '../src/clients.js';
import { readConfig } from '../src/config.js';

// The OpenAPI 3.1 description: served by a running gateway, valid, the same as JSON and YAML,
// and complete: every REST route fastify registered is in it, with its security and errors.

type Json = Record<string, unknown>;
interface Operation {
  operationId?: string;
  tags?: string[];
  summary?: string;
  security?: Array<Record<string, string[]>>;
  responses: Record<string, Json>;
}
interface Document {
  openapi: string;
  info: { version: string; title: string };
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Json>; responses: Record<string, Json>; securitySchemes: Record<string, Json> };
  webhooks: Record<string, { post: Operation & { parameters: Array<{ name: string; in: string; required: boolean }>; requestBody: Json } }>;
}

const ORIGIN = 'https://herald.test';
let stack: Stack;
let document: Document;
// The same gateway built in this process, for fastify's own list of its routes.
let app: App;
let clients: ServiceClients;
let redis: Redis;
let bus: Bus;

before(async () => {
  stack = await startStack({ gatewayEnv: { PUBLIC_ORIGIN: ORIGIN } });
  const response = await call<Document>(stack.gatewayUrl, '/openapi.json');
  assert.equal(response.status, 200);
  document = response.body;

  const config = loadConfig(readConfig, { ...process.env, PUBLIC_ORIGIN: ORIGIN, ENGAGEMENT_TOKEN_SECRET: stack.engagementTokenSecret });
  redis = new Redis(config.redisUrl, { lazyConnect: true });
  clients = createServiceClients(config);
  const logger = createLogger('gateway');
  // Never published to here: the document is all this app serves.
  bus = createKafkaBus({ brokers: config.kafkaBrokers, clientId: 'openapi-test', logger });
  app = await buildApp({ config, clients, redis, bus, logger });
  await app.ready();
});
after(async () => {
  await app.close();
  closeServiceClients(clients);
  await bus.close();
  redis.disconnect();
  await stack.stop();
});

const operations = () =>
  Object.entries(document.paths).flatMap(([path, item]) => Object.entries(item).map(([method, operation]) => ({ path, method: method.toUpperCase(), operation })));

/** Every route in fastify's printRoutes tree (each line: indentation, a segment, its methods). */
function registeredRoutes(tree: string): Array<{ method: string; url: string }> {
  const segments: string[] = [];
  const routes: Array<{ method: string; url: string }> = [];
  for (const line of tree.split('\n')) {
    const match = /^((?:│ {3}| {4})*)[├└]── (.+?)(?: \(([A-Z, ]+)\))?$/u.exec(line);
    if (!match?.[2]) continue;
    segments.length = [...(match[1] ?? '')].length / 4;
    segments.push(match[2]);
    for (const method of (match[3] ?? '').split(', ').filter(Boolean)) routes.push({ method, url: segments.join('') });
  }
  return routes;
}

test('the served document is valid OpenAPI 3.1 by a real validator, version 1.0.0', async () => {
  const validator = new Validator();
  const result = await validator.validate(document as unknown as Json);
  assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
  assert.equal(validator.version, '3.1');
  assert.equal(document.openapi, '3.1.0');
  assert.equal(document.info.version, '1.0.0');
  // The validator does catch a broken document.
  const broken = structuredClone(document) as unknown as Json;
  delete broken.info;
  assert.equal((await new Validator().validate(broken)).valid, false);
});

test('JSON and YAML are one document, served with caching headers', async () => {
  const json = await fetch(`${stack.gatewayUrl}/openapi.json`);
  const yaml = await fetch(`${stack.gatewayUrl}/openapi.yaml`);
  assert.equal(json.headers.get('content-type'), 'application/json; charset=utf-8');
  assert.equal(yaml.headers.get('content-type'), 'application/yaml; charset=utf-8');
  assert.deepEqual(parseYaml(await yaml.text()), await json.json());
  for (const response of [json, yaml]) {
    assert.equal(response.headers.get('cache-control'), 'public, max-age=300');
    const etag = response.headers.get('etag') ?? '';
    assert.match(etag, /^"[\w-]+"$/);
    const again = await fetch(response.url, { headers: { 'if-none-match': etag } });
    assert.equal(again.status, 304);
  }
});

test('every REST route fastify registered under /api/v1 is documented, and nothing else', () => {
  const registered = registeredRoutes(app.printRoutes({ commonPrefix: false }))
    .filter(({ method, url }) => url.startsWith('/api/v1/') && method !== 'HEAD' && method !== 'OPTIONS')
    .map(({ method, url }) => `${method} ${url.replace(/:(\w+)/g, '{$1}')}`)
    .sort();
  const documented = operations()
    .map(({ method, path }) => `${method} ${path}`)
    .sort();
  assert.ok(registered.length >= 30, `only ${registered.length} routes parsed from printRoutes`);
  assert.deepEqual(documented, registered);
  // The process built here describes itself exactly as the running gateway does.
  assert.deepEqual(JSON.parse(JSON.stringify(app.swagger())), document);
  // Pages, documentation and the documents themselves are not operations.
  for (const path of Object.keys(document.paths)) assert.match(path, /^\/api\/v1\//);
});

test('operations have unique operationIds, tags and summaries', () => {
  const ids = operations().map(({ operation }) => operation.operationId);
  assert.equal(new Set(ids).size, ids.length);
  for (const { path, method, operation } of operations()) {
    assert.match(operation.operationId ?? '', /^[a-z][A-Za-z]+$/, `${method} ${path}`);
    assert.ok((operation.tags ?? []).length === 1, `${method} ${path} has one tag`);
    assert.ok((operation.summary ?? '').length > 10, `${method} ${path} has a summary`);
  }
  assert.deepEqual(document.paths['/api/v1/server/subscribers/{subscriberId}']?.get?.operationId, 'getSubscriber');
  assert.deepEqual(document.paths['/api/v1/server/ask']?.post?.tags, ['Ask']);
});

test("security: a full key or a member's session on server routes, the site key on browser routes, none on public ones", () => {
  assert.deepEqual(document.components.securitySchemes, {
    apiKey: { type: 'http', scheme: 'bearer', bearerFormat: 'pk_<id>.<secret>', description: 'A full API key (secret: server side only)' },
    siteKey: {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'pk_<id>',
      description: "The site's public key, for the browser SDK; the request's Origin must be the site's domain",
    },
    session: {
      type: 'apiKey',
      in: 'cookie',
      name: 'herald_session',
      description: "A signed-in member's session (POST /sign-in/links, then the emailed link; or POST /sign-in/passkey); its role decides what it may call, and every state-changing request also needs the X-CSRF-Token header from GET /me",
    },
  });
  const siteKeyPaths = ['/api/v1/subscribe', '/api/v1/subscription-change', '/api/v1/unsubscribe', '/api/v1/sdk-config'];
  const publicPaths = ['/api/v1/site/{siteSlug}', '/api/v1/events', '/api/v1/answer/{token}', '/api/v1/enroll/{token}', '/api/v1/server/sign-in/links', '/api/v1/server/sign-in/passkey/options', '/api/v1/server/sign-in/passkey', '/api/v1/slack/interactions'];
  for (const { path, method, operation } of operations()) {
    const server = path.startsWith('/api/v1/server/') && !publicPaths.includes(path);
    const expected = server ? [{ apiKey: [] }, { session: [] }] : siteKeyPaths.includes(path) ? [{ siteKey: [] }] : [];
    if (expected.length === 0) assert.ok(publicPaths.includes(path), `${method} ${path} is public`);
    assert.deepEqual(operation.security, expected, `${method} ${path}`);
  }
});

test('every operation documents its errors in the shared Error shape', () => {
  const Error = document.components.schemas.Error as { required: string[]; properties: Json };
  assert.deepEqual(Error.required, ['error', 'code', 'status', 'message', 'hint', 'documentation']);
  for (const field of ['fields', 'upgradeUrl', 'allowed', 'openapi', 'requestId', 'retryAfter']) assert.ok(field in Error.properties, field);
  const content = { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } };
  for (const name of ['BadRequest', 'Unauthorized', 'Forbidden', 'NotFound', 'MethodNotAllowed', 'Conflict', 'RateLimited', 'InternalError', 'Unavailable']) {
    assert.deepEqual(document.components.responses[name]?.content, content, name);
  }
  assert.ok((document.components.responses.MethodNotAllowed?.headers as Json).Allow);
  assert.ok((document.components.responses.RateLimited?.headers as Json)['Retry-After']);
  const named: Record<string, string> = { 400: 'BadRequest', 401: 'Unauthorized', 403: 'Forbidden', 404: 'NotFound', 429: 'RateLimited', 500: 'InternalError', 503: 'Unavailable' };
  for (const { path, method, operation } of operations()) {
    const codes = ['400', '403', '404', '500', '503', ...(operation.security?.length ? ['401'] : [])];
    for (const code of codes) assert.deepEqual(operation.responses[code], { $ref: `#/components/responses/${named[code]}` }, `${method} ${path} ${code}`);
    // /ask's pending limit is a 429 with only `error`; every other 429 is the shared one.
    if (!(path === '/api/v1/server/ask' && method === 'POST')) assert.deepEqual(operation.responses['429'], { $ref: '#/components/responses/RateLimited' }, `${method} ${path}`);
    assert.ok(Object.keys(operation.responses).some((code) => code.startsWith('2')), `${method} ${path} has a success response`);
  }
});

test('the webhooks section describes every event Herald sends, with the Standard Webhooks headers', () => {
  assert.deepEqual(Object.keys(document.webhooks).sort(), ['ask.answered', 'ask.expired', 'ask.withdrawn', 'decision.answered', 'decision.cancelled', 'decision.expired']);
  for (const [type, { post }] of Object.entries(document.webhooks)) {
    assert.deepEqual(
      post.parameters.map(({ name, in: where, required }) => ({ name, in: where, required })),
      ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((name) => ({ name, in: 'header', required: true })),
    );
    const schema = ((post.requestBody.content as Json)['application/json'] as { schema: { required: string[]; properties: { type: Json } } }).schema;
    assert.deepEqual(schema.required, ['type', 'timestamp', 'data']);
    assert.equal(schema.properties.type.const, type);
  }
});

test('an unknown path points at the document; a known path with another method is a 405', async () => {
  const unknown = await call(stack.gatewayUrl, '/api/v1/server/nothing-here');
  assert.equal(unknown.status, 404);
  assert.equal(unknown.body.openapi, `${ORIGIN}/openapi.json`);
  const wrongMethod = await call(stack.gatewayUrl, '/api/v1/server/identity', { method: 'DELETE' });
  assert.equal(wrongMethod.status, 405);
  assert.equal(wrongMethod.headers.get('allow'), 'GET, HEAD');
  assert.equal(document.paths['/api/v1/server/identity']?.delete, undefined);
});
