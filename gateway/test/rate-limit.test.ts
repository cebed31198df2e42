import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, createWorkspace, freePort, SERVER_API, startStack, type ApiResponse, type Stack } from '@herald/testkit';

// The per-key limit across two gateway processes sharing Redis, its headers and its reset; and
// the per-replica fallback while Redis is unreachable.

const WINDOW_MS = 60_000;
/** A gateway with a short window, so a reset can be observed without waiting a minute. */
const SHORT_WINDOW_MS = 2_000;
let stack: Stack;
let shortWindowUrl: string;

before(async () => {
  // Two replicas with the production window share one Redis.
  stack = await startStack({ gateways: 2 });
  shortWindowUrl = await stack.addGateway({ RATE_LIMIT_WINDOW_MS: String(SHORT_WINDOW_MS) });
});
after(() => stack.stop());

function identityFrom(url: string, key: string) {
  return call(url, `${SERVER_API}/identity`, { key });
}

function assertHeaders(response: ApiResponse, limit: number): void {
  assert.equal(response.headers.get('x-ratelimit-limit'), String(limit));
  const remaining = Number(response.headers.get('x-ratelimit-remaining'));
  assert.ok(Number.isInteger(remaining) && remaining >= 0 && remaining < limit);
  const reset = Number(response.headers.get('x-ratelimit-reset'));
  const nowSeconds = Date.now() / 1_000;
  assert.ok(reset >= nowSeconds - 1 && reset <= nowSeconds + WINDOW_MS / 1_000 + 1, `reset ${reset} near now ${nowSeconds}`);
}

test('exactly the plan limit is admitted across two replicas, with headers on every response', async () => {
  const workspace = await createWorkspace('free'); // 100 requests per window
  const [first, second] = stack.gatewayUrls as [string, string];
  // Warm each replica's key cache so the burst below measures the limiter, not start-up.
  const warm = await Promise.all([identityFrom(first, workspace.apiKey), identityFrom(second, workspace.apiKey)]);
  const responses = [
    ...warm,
    ...(await Promise.all(Array.from({ length: 148 }, (_, index) => identityFrom(index % 2 ? first : second, workspace.apiKey)))),
  ];
  const admitted = responses.filter((response) => response.status === 200);
  const limited = responses.filter((response) => response.status === 429);
  assert.equal(admitted.length, 100);
  assert.equal(limited.length, 50);
  for (const response of responses) assertHeaders(response, 100);
  // Each admitted request saw a distinct remaining count: 99 down to 0.
  const remaining = admitted.map((response) => Number(response.headers.get('x-ratelimit-remaining'))).sort((a, b) => a - b);
  assert.deepEqual(remaining, Array.from({ length: 100 }, (_, index) => index));
  for (const response of limited) {
    assert.equal(response.headers.get('x-ratelimit-remaining'), '0');
    const retryAfter = Number(response.headers.get('retry-after'));
    assert.ok(retryAfter >= 1 && retryAfter <= WINDOW_MS / 1_000);
    assert.deepEqual(response.body, {
      error: 'Rate limit exceeded',
      code: 'rate_limited',
      status: 429,
      message: `Rate limit of 100 requests per minute exceeded; retry in ${retryAfter} s.`,
      hint: 'Wait for the number of seconds in Retry-After before sending again.',
      documentation: 'http://localhost:8080/docs/errors#rate_limited',
      resetIn: retryAfter,
      retryAfter,
      limit: 100,
    });
  }
});

test('after Retry-After the key is admitted again', async () => {
  const workspace = await createWorkspace('free');
  // Fill the window at once, then keep asking until refused: under load filling may outlast the window.
  await identityFrom(shortWindowUrl, workspace.apiKey); // the key's verification cached
  await Promise.all(Array.from({ length: 99 }, () => identityFrom(shortWindowUrl, workspace.apiKey)));
  let limited = await identityFrom(shortWindowUrl, workspace.apiKey);
  for (let sent = 0; limited.status === 200 && sent < 1_000; sent += 1) limited = await identityFrom(shortWindowUrl, workspace.apiKey);
  assert.equal(limited.status, 429);
  const retryAfter = Number(limited.headers.get('retry-after'));
  assert.ok(retryAfter >= 1 && retryAfter <= SHORT_WINDOW_MS / 1_000);
  // The reset is when the oldest request leaves the window, which is what Retry-After counts down to.
  const reset = Number(limited.headers.get('x-ratelimit-reset'));
  const now = Date.now() / 1_000;
  assert.ok(reset >= now && reset <= now + retryAfter + 1, `reset ${reset}, now ${now}, retry after ${retryAfter}`);
  // Retry-After is rounded up to whole seconds, counted on the limiter's clock before this response
  // arrived: waiting that long from here is enough (the 50 ms cover timer granularity).
  await new Promise((resolve) => setTimeout(resolve, retryAfter * 1_000 + 50));
  const again = await identityFrom(shortWindowUrl, workspace.apiKey);
  assert.equal(again.status, 200);
});

test('keys have separate buckets', async () => {
  const [a, b] = await Promise.all([createWorkspace('free'), createWorkspace('free')]);
  await Promise.all(Array.from({ length: 100 }, () => identityFrom(stack.gatewayUrl, a.apiKey)));
  assert.equal((await identityFrom(stack.gatewayUrl, a.apiKey)).status, 429);
  const other = await identityFrom(stack.gatewayUrl, b.apiKey);
  assert.equal(other.status, 200);
  assert.equal(other.headers.get('x-ratelimit-remaining'), '99');
});

test('while Redis is unreachable each replica enforces its share of the limit', async () => {
  const closedPort = await freePort();
  const isolated = await startStack({
    gatewayEnv: { REDIS_URL: `redis://127.0.0.1:${closedPort}`, RATE_LIMIT_FALLBACK_REPLICAS: '2' },
  });
  try {
    const workspace = await createWorkspace('free');
    const responses = [];
    for (let index = 0; index < 60; index += 1) responses.push(await identityFrom(isolated.gatewayUrl, workspace.apiKey));
    assert.equal(responses.filter((response) => response.status === 200).length, 50);
    assert.equal(responses.filter((response) => response.status === 429).length, 10);
    for (const response of responses) assert.equal(response.headers.get('x-ratelimit-limit'), '50');
  } finally {
    await isolated.stop();
  }
});

test('a request with a valid key that no route takes is counted and carries the headers; with a bad key it is a plain 404', async () => {
  const workspace = await createWorkspace('free');
  const [first] = stack.gatewayUrls as [string];
  const known = await identityFrom(first, workspace.apiKey);
  assertHeaders(known, 100);
  const unknown = await call(first, `${SERVER_API}/no-such-resource`, { key: workspace.apiKey });
  assert.equal(unknown.status, 404);
  assertHeaders(unknown, 100);
  assert.equal(Number(unknown.headers.get('x-ratelimit-remaining')), Number(known.headers.get('x-ratelimit-remaining')) - 1);
  const wrongMethod = await call(first, `${SERVER_API}/identity`, { method: 'DELETE', key: workspace.apiKey });
  assert.equal(wrongMethod.status, 405);
  assertHeaders(wrongMethod, 100);
  const badKey = await call(first, `${SERVER_API}/no-such-resource`, { key: 'pk_nothing.wrong' });
  assert.equal(badKey.status, 404);
  assert.equal(badKey.headers.get('x-ratelimit-limit'), null);
});
