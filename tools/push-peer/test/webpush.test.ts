/**
 * Cross-check against an independent sender: the `web-push` npm package (HTTP/1.1 over TLS, its
 * own aes128gcm and VAPID code) must be accepted and decrypted exactly; and its VAPID key must be
 * the one a restricted subscription accepts.
 */
import assert from 'node:assert/strict';
import https from 'node:https';
import { after, before, test } from 'node:test';

import webpush from 'web-push';

import { startPushPeer, type PushPeer } from '../src/index.js';

let peer: PushPeer;
let agent: https.Agent;
const vapid = webpush.generateVAPIDKeys();
const vapidDetails = { subject: 'mailto:push-tests@herald.example', publicKey: vapid.publicKey, privateKey: vapid.privateKey };

before(async () => {
  peer = await startPushPeer();
  agent = new https.Agent({ ca: peer.ca, keepAlive: true });
});

after(async () => {
  agent.destroy();
  await peer.close();
});

test('web-push over HTTP/1.1: 201, plaintext decrypted exactly, headers and VAPID claims recorded', async () => {
  const sub = peer.createSubscription({ applicationServerKey: vapid.publicKey });
  const payload = JSON.stringify({ title: 'Hello from web-push', body: 'ünïcödé ✓ '.repeat(50) });
  const result = await webpush.sendNotification(sub, payload, { vapidDetails, agent, TTL: 120, urgency: 'low', topic: 'greeting' });
  assert.equal(result.statusCode, 201);
  assert.match(String(result.headers['location']), new RegExp(`^${peer.origin.replace(/[.]/g, '\\.')}/message/`));
  const [message] = peer.received(sub.endpoint);
  assert.ok(message);
  assert.equal(message.plaintext.toString('utf8'), payload);
  assert.equal(message.httpVersion, '1.1');
  assert.equal(message.ttl, 120);
  assert.equal(message.urgency, 'low');
  assert.equal(message.topic, 'greeting');
  assert.equal(message.vapid.aud, peer.origin);
  assert.equal(message.vapid.sub, 'mailto:push-tests@herald.example');
  assert.equal(message.vapid.publicKey, vapid.publicKey);
});

test('web-push with a binary payload and a second message on the same keep-alive connection', async () => {
  const sub = peer.createSubscription();
  const bytes = Buffer.from(Array.from({ length: 3000 }, (_, i) => i % 256));
  assert.equal((await webpush.sendNotification(sub, bytes, { vapidDetails, agent })).statusCode, 201);
  assert.equal((await webpush.sendNotification(sub, 'second', { vapidDetails, agent })).statusCode, 201);
  const messages = peer.received(sub.endpoint);
  assert.deepEqual(messages[0]?.plaintext, bytes);
  assert.equal(messages[1]?.plaintext.toString(), 'second');
});

test('web-push signing with another key is refused by a restricted subscription (403)', async () => {
  const sub = peer.createSubscription({ applicationServerKey: vapid.publicKey });
  const other = webpush.generateVAPIDKeys();
  await assert.rejects(
    webpush.sendNotification(sub, 'nope', { vapidDetails: { ...vapidDetails, publicKey: other.publicKey, privateKey: other.privateKey }, agent }),
    (err: unknown) => err instanceof webpush.WebPushError && err.statusCode === 403 && err.body.includes('vapid_key_mismatch'),
  );
  assert.deepEqual(peer.received(sub.endpoint), []);
});

test('web-push sees injected faults as a real service would (429 with Retry-After)', async () => {
  const sub = peer.createSubscription();
  peer.respondWith(sub.endpoint, { status: 429, retryAfter: 30, times: 1 });
  await assert.rejects(
    webpush.sendNotification(sub, 'later', { vapidDetails, agent }),
    (err: unknown) => err instanceof webpush.WebPushError && err.statusCode === 429 && err.headers['retry-after'] === '30',
  );
  assert.equal((await webpush.sendNotification(sub, 'now', { vapidDetails, agent })).statusCode, 201);
  assert.deepEqual(peer.attempts(sub.endpoint).map((a) => [a.status, a.httpVersion]), [
    [429, '1.1'],
    [201, '1.1'],
  ]);
});
