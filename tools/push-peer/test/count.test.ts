/**
 * Count mode and key pools: a million subscriptions from a thousand key pairs; 201s counted per
 * endpoint without decryption; VAPID still checked (once per distinct token), so a bad token is caught.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { startPushPeer, subscriptionFromPool, type PushPeer } from '../src/index.js';
import { encrypt, H2, makeVapidKeys, pathOf, reply, signJwt, claimsFor, vapidAuthorization, type VapidKeys } from './sender.js';

let peer: PushPeer;
let client: H2;
let vapid: VapidKeys;

before(async () => {
  peer = await startPushPeer({ mode: 'count' });
  client = new H2(peer.origin, peer.ca);
  vapid = makeVapidKeys();
});

after(async () => {
  await client.close();
  await peer.close();
});

test('createSubscriptions(1_000_000, {keyPool: 1000}): unique endpoints, keys cycling through the pool', () => {
  const start = performance.now();
  const subs = peer.createSubscriptions(1_000_000, { keyPool: 1000 });
  const ms = performance.now() - start;
  assert.equal(subs.length, 1_000_000);
  assert.ok(ms < 20_000, `took ${ms} ms`);
  assert.equal(subs[0]?.endpoint, `${peer.origin}/push/0`);
  assert.equal(subs[999_999]?.endpoint, `${peer.origin}/push/999999`);
  assert.equal(new Set(subs.map((s) => s.endpoint)).size, 1_000_000);
  assert.deepEqual(subs[1]?.keys, subs[1001]?.keys);
  assert.notDeepEqual(subs[1]?.keys, subs[2]?.keys);
  assert.equal(new Set(subs.slice(0, 2000).map((s) => s.keys.p256dh)).size, 1000);
  const info = peer.subscriptionFor(subs[123_456]!.endpoint);
  assert.equal(info?.poolIndex, 123_456);
  assert.equal(info?.keys.p256dh, subs[456]?.keys.p256dh);
  assert.deepEqual(subscriptionFromPool(peer.origin, [info!.keys], 123_456), subs[123_456]);
  assert.equal(peer.subscriptionFor(`${peer.origin}/push/1000000`), undefined, 'indices past those created do not exist');
  assert.throws(() => peer.createSubscriptions(1, { keyPool: 10 }), RangeError);
  // Later calls continue the numbering and share the pool.
  const more = peer.createSubscriptions(2);
  assert.equal(more[0]?.endpoint, `${peer.origin}/push/1000000`);
  assert.deepEqual(more[0]?.keys, subs[0]?.keys);
});

test('count mode counts 201s per endpoint and in total, records no messages, keeps the checks that are cheap', async () => {
  const subs = peer.createSubscriptions(10);
  const auth = vapidAuthorization(vapid, peer.origin);
  const headers = { ttl: '60', 'content-encoding': 'aes128gcm', authorization: auth };
  const base = peer.stats();
  const results = await Promise.all(
    Array.from({ length: 50 }, (_, i) => client.request('POST', pathOf(subs[i % 10]!.endpoint), headers, encrypt(Buffer.from(`m${i}`), subs[i % 10]!.keys))),
  );
  assert.deepEqual(new Set(results.map((r) => r.status)), new Set([201]));
  assert.equal(peer.acceptedCount - base.accepted, 50);
  for (const s of subs) {
    assert.equal(peer.acceptedCountFor(s.endpoint), 5);
    assert.equal(peer.attemptCount(s.endpoint), 5);
  }
  assert.deepEqual(peer.received(), []);
  assert.deepEqual(peer.attempts(), []);
  const stats = peer.stats();
  assert.equal(stats.mode, 'count');
  assert.equal(stats.accepted - base.accepted, 50);
  assert.equal(stats.stored, stats.accepted);
  assert.equal(stats.acceptedHistogram['5'], 10);

  // A token that does not verify is still rejected (it is not in the cache)...
  const forged = `vapid t=${signJwt(makeVapidKeys().privateKey, claimsFor(peer.origin))}, k=${vapid.publicKey}`;
  const body = encrypt(Buffer.from('x'), subs[0]!.keys);
  const bad = reply(await client.request('POST', pathOf(subs[0]!.endpoint), { ...headers, authorization: forged }, body));
  assert.equal(bad.status, 403);
  assert.equal(bad.error, 'bad_signature');
  // ...as is a wrong audience, and a missing TTL.
  const wrongAud = await client.request('POST', pathOf(subs[0]!.endpoint), { ...headers, authorization: vapidAuthorization(vapid, 'https://push.example.net') }, body);
  assert.equal(wrongAud.status, 403);
  const { ttl: _ttl, ...noTtl } = headers;
  assert.equal((await client.request('POST', pathOf(subs[0]!.endpoint), noTtl, body)).status, 400);
  // A structurally broken body is rejected; a well-formed but undecryptable one is counted (no decryption here).
  assert.equal((await client.request('POST', pathOf(subs[0]!.endpoint), headers, body.subarray(0, 40))).status, 400);
  assert.equal((await client.request('POST', pathOf(subs[0]!.endpoint), headers, encrypt(Buffer.from('x'), subs[1]!.keys))).status, 201);
  // Unknown endpoints are still 404.
  assert.equal((await client.request('POST', '/push/99999999', headers, body)).status, 404);
  assert.equal(peer.stats().errors['bad_signature'], 1);
});

test('count mode enforces applicationServerKey on pool subscriptions created with one', async () => {
  const restricted = peer.createSubscriptions(3, { applicationServerKey: vapid.publicKey });
  const other = makeVapidKeys();
  const body = encrypt(Buffer.from('x'), restricted[0]!.keys);
  const headers = { ttl: '60', 'content-encoding': 'aes128gcm' };
  assert.equal((await client.request('POST', pathOf(restricted[0]!.endpoint), { ...headers, authorization: vapidAuthorization(vapid, peer.origin) }, body)).status, 201);
  const res = reply(await client.request('POST', pathOf(restricted[0]!.endpoint), { ...headers, authorization: vapidAuthorization(other, peer.origin) }, body));
  assert.equal(res.status, 403);
  assert.equal(res.error, 'vapid_key_mismatch');
});
