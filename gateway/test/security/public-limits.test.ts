import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, createWorkspace, SERVER_API, startStack, type Stack, type TestWorkspace } from '@herald/testkit';

import { countingInRedis, freshClient, recordTried, reportTried, requestFrom, type RawAnswer } from './suite.js';

// Issue #22, finding 2: the public pages (/api/v1/site/*, /s/*, /a/*, /api/v1/answer/*, /enroll/*)
// are limited per client IP and per tenant, so one tenant's traffic never starves another's answer
// page; behind a proxy, TRUST_PROXY says whose X-Forwarded-For names the client.

let stack: Stack;
let tenantA: TestWorkspace;
let tenantB: TestWorkspace;
/** Tenant B's question: its answer page's token. */
let tokenB: string;

before(async () => {
  stack = await startStack({ decisions: true });
  [tenantA, tenantB] = await Promise.all([createWorkspace('growth'), createWorkspace('growth')]);
  const asked = await call<{ liveUrl: string }>(stack.gatewayUrl, `${SERVER_API}/ask`, { method: 'POST', key: tenantB.apiKey, body: { question: 'Deploy?', wait: false } });
  assert.equal(asked.status, 200, JSON.stringify(asked.body));
  tokenB = asked.body.liveUrl.slice(asked.body.liveUrl.indexOf('/a/') + 3);
});
after(async () => {
  reportTried('public-limits');
  await stack.stop();
});

const isRateLimited = (answer: RawAnswer): boolean => answer.status === 429 && (answer.body as { code?: string }).code === 'rate_limited';

test("finding 2: one tenant's traffic from an address does not starve another tenant's answer page from that address", async () => {
  const gateway = await stack.addGateway({ IP_RATE_LIMIT_PER_MINUTE: '3' });
  const siteA = `/api/v1/site/${tenantA.siteSlug}`;
  await countingInRedis(gateway, 'GET', siteA, 3);
  const client = freshClient();
  for (let n = 1; n <= 3; n += 1) {
    recordTried("traffic to another tenant's public page");
    const allowed = await requestFrom(gateway, client, 'GET', siteA);
    assert.deepEqual([allowed.status, allowed.headers['x-ratelimit-remaining']], [200, String(3 - n)]);
  }
  recordTried("traffic to another tenant's public page", 2);
  assert.ok(isRateLimited(await requestFrom(gateway, client, 'GET', siteA)));
  // The same tenant's hosted page shares its bucket.
  assert.ok(isRateLimited(await requestFrom(gateway, client, 'GET', `/s/${tenantA.siteSlug}`)));
  // Tenant B's pages have buckets of their own, from the same address.
  const page = await requestFrom(gateway, client, 'GET', `/a/${tokenB}`);
  assert.deepEqual([page.status, page.headers['x-ratelimit-remaining']], [200, '2']);
  const site = await requestFrom(gateway, client, 'GET', `/api/v1/site/${tenantB.siteSlug}`);
  assert.deepEqual([site.status, site.headers['x-ratelimit-remaining']], [200, '2']);
  const answered = await requestFrom(gateway, client, 'POST', `/api/v1/answer/${tokenB}`, { 'content-type': 'application/json' }, JSON.stringify({ answer: 'yes' }));
  assert.equal(answered.status, 200, JSON.stringify(answered.body));
  assert.equal((answered.body as { value?: string }).value, 'yes');
});

test('finding 2: without TRUST_PROXY, X-Forwarded-For is ignored: forged headers do not make new buckets', async () => {
  const gateway = await stack.addGateway({ IP_RATE_LIMIT_PER_MINUTE: '2' });
  const siteA = `/api/v1/site/${tenantA.siteSlug}`;
  await countingInRedis(gateway, 'GET', siteA, 2);
  const client = freshClient();
  const answers: RawAnswer[] = [];
  for (let n = 0; n < 4; n += 1) {
    recordTried('forged X-Forwarded-For');
    answers.push(await requestFrom(gateway, client, 'GET', siteA, { 'x-forwarded-for': `198.51.100.${n + 1}` }));
  }
  assert.deepEqual(
    answers.map((answer) => answer.status),
    [200, 200, 429, 429],
    JSON.stringify(answers.map((answer) => answer.headers)),
  );
});

test('finding 2: with TRUST_PROXY (CIDRs or a hop count), each client behind the proxy has its own bucket, and what a client prepends is not trusted', async () => {
  const siteA = `/api/v1/site/${tenantA.siteSlug}`;
  // Each gateway of a stack shares its Redis buckets: each setting gets clients of its own.
  for (const [trustProxy, first, second] of [
    ['127.0.0.0/8', '203.0.113.10', '203.0.113.11'],
    ['1', '203.0.113.20', '203.0.113.21'],
  ] as const) {
    const gateway = await stack.addGateway({ IP_RATE_LIMIT_PER_MINUTE: '2', TRUST_PROXY: trustProxy });
    await countingInRedis(gateway, 'GET', siteA, 2);
    const proxy = freshClient();
    const statuses = async (forwardedFor: string, times: number): Promise<number[]> => {
      const found: number[] = [];
      for (let n = 0; n < times; n += 1) found.push((await requestFrom(gateway, proxy, 'GET', siteA, { 'x-forwarded-for': forwardedFor })).status);
      return found;
    };
    // Two clients behind one proxy address: two buckets.
    assert.deepEqual(await statuses(first, 3), [200, 200, 429], trustProxy);
    assert.deepEqual(await statuses(second, 2), [200, 200], trustProxy);
    // A client that prepends addresses of its own is still the address the proxy saw.
    recordTried('forged X-Forwarded-For', 2);
    assert.deepEqual(await statuses(`192.0.2.99, ${first}`, 1), [429], trustProxy);
    assert.deepEqual(await statuses(`192.0.2.98, ${second}`, 1), [429], trustProxy);
  }
});

test('finding 2: a TRUST_PROXY the gateway cannot read stops it at start, naming the variable', async () => {
  for (const [value, rule] of [
    ['everyone', 'must be a hop count from 0 to 10, or addresses and CIDRs ("everyone" is neither)'],
    ['11', 'must be a hop count from 0 to 10, or addresses and CIDRs'],
    ['10.0.0.0/33', 'must be a hop count from 0 to 10, or addresses and CIDRs ("10.0.0.0/33" is neither)'],
    ['10.0.0.0/8,', 'must be a hop count from 0 to 10, or addresses and CIDRs ("" is neither)'],
  ] as const) {
    recordTried('unreadable TRUST_PROXY');
    await assert.rejects(stack.addGateway({ TRUST_PROXY: value }), (err: Error) => err.message.includes(`exited (78)`) && err.message.includes(`TRUST_PROXY ${rule}, got "${value}"`), value);
  }
});
