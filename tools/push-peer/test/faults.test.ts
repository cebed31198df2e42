/**
 * Fault injection: every rule, `times`, sequences, the default rule, precedence, the per-endpoint
 * attempt log a retry test asserts on, and that malformed requests are rejected before any fault.
 */
import assert from 'node:assert/strict';
import https from 'node:https';
import { after, before, beforeEach, test } from 'node:test';

import { startPushPeer, type PushPeer, type PushSubscriptionJSON } from '../src/index.js';
import { eventually } from './eventually.js';
import { encrypt, H2, makeVapidKeys, pathOf, vapidAuthorization, reply, type Outcome, type Reply, type VapidKeys } from './sender.js';

let peer: PushPeer;
let client: H2;
let vapid: VapidKeys;

before(async () => {
  peer = await startPushPeer();
  client = new H2(peer.origin, peer.ca);
  vapid = makeVapidKeys();
});

after(async () => {
  await client.close();
  await peer.close();
});

beforeEach(() => peer.reset());

function send(sub: PushSubscriptionJSON, headers: Record<string, string> = {}): Promise<Outcome> {
  return client.request(
    'POST',
    pathOf(sub.endpoint),
    { ttl: '60', 'content-encoding': 'aes128gcm', authorization: vapidAuthorization(vapid, peer.origin), ...headers },
    encrypt(Buffer.from('payload'), sub.keys),
  );
}

const statusOf = (o: Outcome) => o.status;

for (const status of [404, 410, 413, 400, 500, 503]) {
  test(`{status: ${status}} answers ${status} to a valid message and records nothing`, async () => {
    const sub = peer.createSubscription();
    peer.respondWith(sub.endpoint, { status });
    const res = reply(await send(sub));
    assert.equal(res.status, status);
    assert.equal(res.error, 'fault');
    assert.equal(res.headers['retry-after'], undefined);
    assert.deepEqual(peer.received(sub.endpoint), []);
    const [attempt] = peer.attempts(sub.endpoint);
    assert.equal(attempt?.status, status);
    assert.deepEqual(attempt?.fault, { status });
    // Without `times` the rule stays.
    assert.equal(statusOf(await send(sub)), status);
  });
}

test('{status: 429, retryAfter} sends Retry-After', async () => {
  const sub = peer.createSubscription();
  peer.respondWith(sub.endpoint, { status: 429, retryAfter: 7 });
  const res = reply(await send(sub));
  assert.equal(res.status, 429);
  assert.equal(res.headers['retry-after'], '7');
  peer.respondWith(sub.endpoint, { status: 503, retryAfter: 'Wed, 21 Oct 2099 07:28:00 GMT' });
  const dated = reply(await send(sub));
  assert.equal(dated.headers['retry-after'], 'Wed, 21 Oct 2099 07:28:00 GMT');
});

test('{times: n} applies to the next n requests, then the endpoint is normal again', async () => {
  const sub = peer.createSubscription();
  peer.respondWith(sub.endpoint, { status: 500, times: 2 });
  const statuses = [];
  for (let i = 0; i < 4; i++) statuses.push(statusOf(await send(sub)));
  assert.deepEqual(statuses, [500, 500, 201, 201]);
  assert.deepEqual(peer.attempts(sub.endpoint).map((a) => a.status), [500, 500, 201, 201]);
  assert.equal(peer.attemptCount(sub.endpoint), 4);
  assert.equal(peer.acceptedCountFor(sub.endpoint), 2);
  assert.equal(peer.received(sub.endpoint).length, 2);
});

test('a list of rules is applied in order (500 once, 429 once with Retry-After, then accept)', async () => {
  const sub = peer.createSubscription();
  peer.respondWith(sub.endpoint, [
    { status: 500, times: 1 },
    { status: 429, retryAfter: 1, times: 1 },
  ]);
  const first = await send(sub);
  const second = reply(await send(sub));
  const third = await send(sub);
  assert.equal(first.status, 500);
  assert.equal(second.status, 429);
  assert.equal(second.headers['retry-after'], '1');
  assert.equal(third.status, 201);
});

test('{delayMs} answers slowly, then processes normally; attempt timestamps show the spacing', async () => {
  const sub = peer.createSubscription();
  peer.respondWith(sub.endpoint, { delayMs: 300, times: 1 });
  const start = performance.now();
  const res = await send(sub);
  const elapsed = performance.now() - start;
  assert.equal(res.status, 201);
  assert.ok(elapsed >= 295, `answered after ${elapsed} ms`);
  assert.equal(peer.received(sub.endpoint)[0]?.plaintext.toString(), 'payload');
  assert.equal((await send(sub)).status, 201);
  const [a, b] = peer.attempts(sub.endpoint);
  assert.ok(a && b);
  // The second attempt was sent once the first was answered: at least its 300 ms delay later.
  assert.ok(b.at - a.at >= 295, `attempts ${b.at - a.at} ms apart`);
  assert.ok(a.at > Date.now() - 60_000 && a.at <= Date.now());
});

test('{delayMs}: a sender that goes away while its push waits gave up on it: aborted, nothing stored', async () => {
  const sub = peer.createSubscription();
  peer.respondWith(sub.endpoint, { delayMs: 300, times: 1 });
  const doomed = new H2(peer.origin, peer.ca);
  // Never answered: the stream just closes with its session.
  void doomed
    .request('POST', pathOf(sub.endpoint), { ttl: '60', 'content-encoding': 'aes128gcm', authorization: vapidAuthorization(vapid, peer.origin) }, encrypt(Buffer.from('payload'), sub.keys))
    .catch(() => undefined);
  // Whole request received and held by the delay (the rule is taken once the body is read), then the sender is gone.
  await eventually(() => peer.attempts(sub.endpoint)[0]?.fault !== undefined);
  doomed.destroy();
  // Its answer decided once the delay ran out.
  await eventually(() => peer.attempts(sub.endpoint)[0]?.status !== 0);
  assert.deepEqual(peer.attempts(sub.endpoint).map((a) => a.status), ['aborted']);
  assert.deepEqual([peer.received(sub.endpoint, { includeReplaced: true }).length, peer.stats().aborted, peer.stats().accepted], [0, 1, 0]);
});

test('{delayResponseMs} accepts and records the push at once, then holds its 201', async () => {
  const sub = peer.createSubscription();
  peer.respondWith(sub.endpoint, { delayResponseMs: 300, times: 1 });
  const start = performance.now();
  const answered = send(sub);
  // Recorded and counted before any answer: what the sender has not learnt yet is already pushed.
  while (peer.received(sub.endpoint).length === 0) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual([peer.acceptedCount, peer.attempts(sub.endpoint).map((a) => a.status)], [1, [201]]);
  const res = await answered;
  const elapsed = performance.now() - start;
  assert.equal(res.status, 201);
  assert.ok(elapsed >= 295, `answered after ${elapsed} ms`);
  assert.equal(peer.received(sub.endpoint)[0]?.plaintext.toString(), 'payload');
});

test('{delayResponseMs}: a sender that goes away while the 201 is held pushed it all the same', async () => {
  const sub = peer.createSubscription();
  peer.respondWith(sub.endpoint, { delayResponseMs: 60_000, times: 1 });
  const doomed = new H2(peer.origin, peer.ca);
  let answer: string | undefined;
  void doomed
    .request('POST', pathOf(sub.endpoint), { ttl: '60', 'content-encoding': 'aes128gcm', authorization: vapidAuthorization(vapid, peer.origin) }, encrypt(Buffer.from('payload'), sub.keys))
    .then((outcome) => (answer = `answered ${outcome.status}`), () => (answer = 'failed'));
  while (peer.received(sub.endpoint).length === 0) await new Promise((r) => setTimeout(r, 10));
  doomed.destroy();
  // The sender is gone without an answer; the push counts as accepted.
  assert.equal(answer, undefined);
  assert.deepEqual([peer.received(sub.endpoint).length, peer.stats().accepted, peer.stats().aborted, peer.attempts(sub.endpoint).map((a) => a.status)], [1, 1, 0, [201]]);
});

test('{delayMs, status} waits, then answers the status', async () => {
  const sub = peer.createSubscription();
  peer.respondWith(sub.endpoint, { delayMs: 200, status: 503, retryAfter: 2 });
  const start = performance.now();
  const res = await send(sub);
  assert.ok(performance.now() - start >= 195);
  assert.equal(res.status, 503);
});

test('{resetStream: true} resets the HTTP/2 stream (RST_STREAM INTERNAL_ERROR), once with times: 1', async () => {
  const sub = peer.createSubscription();
  peer.respondWith(sub.endpoint, { resetStream: true, times: 1 });
  const res = await send(sub);
  assert.ok(res.status === 'reset', `expected a reset, got ${res.status}`);
  assert.match(res.code, /NGHTTP2_INTERNAL_ERROR/);
  assert.equal((await send(sub)).status, 201, 'the session survives a reset stream');
  assert.deepEqual(peer.attempts(sub.endpoint).map((a) => a.status), ['reset', 201]);
  assert.equal(peer.stats().resets, 1);
});

test('{resetStream: true} destroys an HTTP/1.1 connection', async () => {
  const sub = peer.createSubscription();
  peer.respondWith(sub.endpoint, { resetStream: true });
  const body = encrypt(Buffer.from('payload'), sub.keys);
  const error = await new Promise<Error & { code?: string }>((resolve, reject) => {
    const req = https.request(sub.endpoint, {
      method: 'POST',
      ca: peer.ca,
      agent: false,
      headers: { ttl: '60', 'content-encoding': 'aes128gcm', authorization: vapidAuthorization(vapid, peer.origin), 'content-length': body.length },
    });
    req.on('response', () => reject(new Error('expected the connection to be destroyed')));
    req.on('error', resolve);
    req.end(body);
  });
  assert.equal(error.code, 'ECONNRESET');
  assert.equal(peer.attempts(sub.endpoint)[0]?.httpVersion, '1.1');
  assert.equal(peer.attempts(sub.endpoint)[0]?.status, 'reset');
});

test('the default rule applies to every endpoint without its own; an endpoint rule wins, then falls back to the default', async () => {
  const a = peer.createSubscription();
  const b = peer.createSubscription();
  peer.respondWith({ status: 503 });
  peer.respondWith(a.endpoint, { status: 429, times: 1 });
  assert.equal(statusOf(await send(a)), 429);
  assert.equal(statusOf(await send(a)), 503);
  assert.equal(statusOf(await send(b)), 503);
  peer.respondWith(null);
  assert.equal(statusOf(await send(a)), 201);
  assert.equal(statusOf(await send(b)), 201);
});

test('respondWith(endpoint, null) clears the endpoint rule; reset() clears all rules and records', async () => {
  const sub = peer.createSubscription();
  peer.respondWith(sub.endpoint, { status: 500 });
  peer.respondWith(sub.endpoint, null);
  assert.equal(statusOf(await send(sub)), 201);
  peer.respondWith({ status: 500 });
  peer.reset();
  assert.equal(statusOf(await send(sub)), 201);
  assert.equal(peer.attemptCount(sub.endpoint), 1);
  assert.equal(peer.stats().accepted, 1);
});

test('a malformed or unauthenticated request is rejected before a fault, which is not consumed', async () => {
  const sub = peer.createSubscription();
  peer.respondWith(sub.endpoint, { status: 500, times: 1 });
  const noTtl = await client.request(
    'POST',
    pathOf(sub.endpoint),
    { 'content-encoding': 'aes128gcm', authorization: vapidAuthorization(vapid, peer.origin) },
    encrypt(Buffer.from('x'), sub.keys),
  );
  assert.equal(noTtl.status, 400);
  assert.equal(statusOf(await send(sub, { authorization: vapidAuthorization(vapid, 'https://elsewhere.example') })), 403);
  assert.equal(statusOf(await send(sub)), 500, 'the fault is still pending');
  assert.equal(statusOf(await send(sub)), 201);
});

test('faults apply before decryption: an undecryptable body still gets the fault', async () => {
  const sub = peer.createSubscription();
  const other = peer.createSubscription();
  peer.respondWith(sub.endpoint, { status: 500, times: 1 });
  const headers = { ttl: '60', 'content-encoding': 'aes128gcm', authorization: vapidAuthorization(vapid, peer.origin) };
  const wrong = encrypt(Buffer.from('x'), other.keys);
  assert.equal(statusOf(await client.request('POST', pathOf(sub.endpoint), headers, wrong)), 500);
  assert.equal(statusOf(await client.request('POST', pathOf(sub.endpoint), headers, wrong)), 400);
});

test('invalid rules are refused', () => {
  const sub = peer.createSubscription();
  assert.throws(() => peer.respondWith(sub.endpoint, { status: 200 }), TypeError);
  assert.throws(() => peer.respondWith(sub.endpoint, { times: 2 }), TypeError);
  assert.throws(() => peer.respondWith(sub.endpoint, { resetStream: true, status: 500 }), TypeError);
  assert.throws(() => peer.respondWith(sub.endpoint, { delayResponseMs: 100, status: 500 }), TypeError);
  assert.throws(() => peer.respondWith(sub.endpoint, { delayResponseMs: -1 }), TypeError);
  assert.throws(() => peer.respondWith(sub.endpoint, { status: 500, times: 0 }), TypeError);
  assert.throws(() => peer.respondWith(sub.endpoint, [{ status: 500 }, { status: 429 }]), TypeError);
  assert.throws(() => peer.respondWith('https://elsewhere.example/push/x', { status: 500 }), TypeError);
});
