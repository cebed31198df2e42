/**
 * The WebSocket face as Firefox speaks to it (PushServiceWebSocket): a `ws` client plays the
 * browser; pushes are sent by the independent `web-push` package to the endpoint the face handed
 * out, encrypted to keys the "browser" made, and decrypted here from what the face forwarded.
 */
import assert from 'node:assert/strict';
import { createECDH, randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import https from 'node:https';
import { after, before, test } from 'node:test';

import webpush from 'web-push';
import { WebSocket } from 'ws';

import { decryptPushMessage, receiverKeys, startPushPeer, type PushPeer } from '../src/index.js';
import { eventually } from './eventually.js';

let peer: PushPeer;
let agent: https.Agent;
const vapid = webpush.generateVAPIDKeys();
const vapidDetails = { subject: 'mailto:push-tests@herald.example', publicKey: vapid.publicKey, privateKey: vapid.privateKey };
/** Firefox sends the key padded. */
const paddedKey = Buffer.from(vapid.publicKey, 'base64url').toString('base64').replace(/\+/g, '-').replace(/\//g, '_');

before(async () => {
  peer = await startPushPeer({ webSocket: true });
  agent = new https.Agent({ ca: peer.ca, keepAlive: true });
});
after(async () => {
  agent.destroy();
  await peer.close();
});

/** A connection that plays Firefox: every message it receives, in order. */
class Browser {
  readonly received: Array<Record<string, unknown>> = [];
  private constructor(readonly socket: WebSocket) {
    socket.on('message', (data) => this.received.push(JSON.parse(data.toString()) as Record<string, unknown>));
  }
  static async open(): Promise<Browser> {
    const socket = new WebSocket(peer.webSocketUrl!, 'push-notification');
    await once(socket, 'open');
    return new Browser(socket);
  }
  async request(message: object): Promise<Record<string, unknown>> {
    const count = this.received.length;
    this.socket.send(JSON.stringify(message));
    return this.next(count);
  }
  async next(count = this.received.length): Promise<Record<string, unknown>> {
    await eventually(() => this.received.length > count);
    return this.received[count]!;
  }
  async close(): Promise<void> {
    this.socket.close();
    await once(this.socket, 'close');
  }
}

const keys = () => {
  const ecdh = createECDH('prime256v1');
  const p256dh = ecdh.generateKeys().toString('base64url');
  return { p256dh, auth: randomBytes(16).toString('base64url'), privateKey: ecdh.getPrivateKey() };
};

test('hello, register with the VAPID key, a push forwarded with its data and acknowledged; stored while offline, sent on the next hello; unregister makes the endpoint 410', async () => {
  const browser = await Browser.open();
  const hello = await browser.request({ messageType: 'hello', broadcasts: {}, use_webpush: true });
  assert.deepEqual(Object.keys(hello).sort(), ['broadcasts', 'messageType', 'status', 'uaid', 'use_webpush']);
  const uaid = String(hello['uaid']);
  assert.match(uaid, /^[0-9a-f]{32}$/);
  assert.deepEqual(peer.connectedBrowsers(), [uaid]);
  const channelID = randomUUID();
  const registered = await browser.request({ channelID, messageType: 'register', key: paddedKey });
  assert.equal(registered['status'], 200);
  const endpoint = String(registered['pushEndpoint']);
  assert.match(endpoint, new RegExp(`^${peer.origin.replace(/[.]/g, '\\.')}/push/w[0-9a-f]{32}$`));
  const own = keys();

  const waiting = browser.received.length;
  const sent = await webpush.sendNotification({ endpoint, keys: own }, 'first', { vapidDetails, agent, TTL: 60, contentEncoding: 'aes128gcm' });
  assert.equal(sent.statusCode, 201);
  const notification = await browser.next(waiting);
  assert.deepEqual({ ...notification, data: undefined, version: undefined, ttl: undefined }, {
    messageType: 'notification',
    channelID,
    data: undefined,
    version: undefined,
    ttl: undefined,
    headers: { encoding: 'aes128gcm' },
  });
  const body = Buffer.from(String(notification['data']), 'base64url');
  assert.equal(Buffer.from(decryptPushMessage(body, receiverKeys(own.privateKey, Buffer.from(own.auth, 'base64url'))).plaintext).toString(), 'first');
  browser.socket.send(JSON.stringify({ messageType: 'ack', updates: [{ channelID, version: notification['version'], code: 100 }] }));
  await eventually(() => peer.browserMessages(endpoint).some((message) => message.ackCode !== undefined));
  assert.deepEqual(
    peer.browserMessages(endpoint).map((message) => [message.version, message.ackCode]),
    [[notification['version'], 100]],
  );

  // Offline: accepted and stored; the next hello with the same UAID gets it.
  await browser.close();
  await eventually(() => peer.connectedBrowsers().length === 0);
  assert.equal((await webpush.sendNotification({ endpoint, keys: own }, 'while away', { vapidDetails, agent, TTL: 60, contentEncoding: 'aes128gcm' })).statusCode, 201);
  assert.equal(peer.browserMessages(endpoint)[1]?.forwardedAt, undefined);
  const back = await Browser.open();
  const again = await back.request({ messageType: 'hello', broadcasts: {}, use_webpush: true, uaid });
  assert.equal(again['uaid'], uaid);
  const stored = await back.next(1);
  assert.equal(Buffer.from(decryptPushMessage(Buffer.from(String(stored['data']), 'base64url'), receiverKeys(own.privateKey, Buffer.from(own.auth, 'base64url'))).plaintext).toString(), 'while away');

  // Another VAPID key than the one registered: 403, as for any restricted subscription.
  const other = webpush.generateVAPIDKeys();
  await assert.rejects(
    webpush.sendNotification({ endpoint, keys: own }, 'x', { vapidDetails: { ...vapidDetails, ...other }, agent, TTL: 60, contentEncoding: 'aes128gcm' }),
    (err: { statusCode: number }) => err.statusCode === 403,
  );

  const unregistered = await back.request({ channelID, messageType: 'unregister', code: 200 });
  assert.deepEqual(unregistered, { messageType: 'unregister', channelID, status: 200 });
  assert.deepEqual(peer.browserChannels().find((channel) => channel.channelID === channelID), {
    uaid,
    channelID,
    endpoint,
    applicationServerKey: vapid.publicKey,
    state: 'unregistered',
    unregisterCode: 200,
  });
  await assert.rejects(
    webpush.sendNotification({ endpoint, keys: own }, 'gone', { vapidDetails, agent, TTL: 60, contentEncoding: 'aes128gcm' }),
    (err: { statusCode: number }) => err.statusCode === 410,
  );
  assert.deepEqual(peer.browserProtocolErrors(), []);
  await back.close();
});

test('a rotated UAID: the browser that says hello with the old one gets a new one, and the old channels answer 410', async () => {
  const browser = await Browser.open();
  const uaid = String((await browser.request({ messageType: 'hello', use_webpush: true }))['uaid']);
  const endpoint = String((await browser.request({ channelID: randomUUID(), messageType: 'register' }))['pushEndpoint']);
  const closed = once(browser.socket, 'close');
  peer.rotateUaids();
  await closed;
  const back = await Browser.open();
  const hello = await back.request({ messageType: 'hello', use_webpush: true, uaid });
  assert.notEqual(hello['uaid'], uaid);
  await assert.rejects(
    webpush.sendNotification({ endpoint, keys: keys() }, 'x', { vapidDetails, agent, TTL: 60, contentEncoding: 'aes128gcm' }),
    (err: { statusCode: number }) => err.statusCode === 410,
  );
  await back.close();
});

test('a register repeated after a reconnect (Firefox resends what got no reply in time) gets the same endpoint; another key for it is off the protocol', async () => {
  peer.reset();
  const browser = await Browser.open();
  const uaid = String((await browser.request({ messageType: 'hello', use_webpush: true }))['uaid']);
  const channelID = randomUUID();
  const first = await browser.request({ channelID, messageType: 'register', key: paddedKey });
  browser.socket.close();
  const back = await Browser.open();
  assert.equal((await back.request({ messageType: 'hello', use_webpush: true, uaid }))['uaid'], uaid);
  const again = await back.request({ channelID, messageType: 'register', key: paddedKey });
  assert.deepEqual([again['status'], again['pushEndpoint']], [200, first['pushEndpoint']]);
  const closed = once(back.socket, 'close');
  back.socket.send(JSON.stringify({ messageType: 'register', channelID }));
  await closed;
  assert.deepEqual(peer.browserProtocolErrors(), [`register of channelID ${channelID} again with another key`]);
});

test('off the protocol: a register before hello, a malformed key, an ack of nothing sent each close the connection and are recorded', async () => {
  peer.reset();
  const early = await Browser.open();
  const closedEarly = once(early.socket, 'close');
  early.socket.send(JSON.stringify({ messageType: 'register', channelID: randomUUID() }));
  assert.equal((await closedEarly)[0], 1002);

  const browser = await Browser.open();
  await browser.request({ messageType: 'hello', use_webpush: true });
  const closed = once(browser.socket, 'close');
  browser.socket.send(JSON.stringify({ messageType: 'register', channelID: randomUUID(), key: vapid.publicKey + 'A' }));
  await closed;

  const third = await Browser.open();
  await third.request({ messageType: 'hello', use_webpush: true });
  const channelID = randomUUID();
  await third.request({ messageType: 'register', channelID });
  const closedThird = once(third.socket, 'close');
  third.socket.send(JSON.stringify({ messageType: 'ack', updates: [{ channelID, version: 'nope', code: 100 }] }));
  await closedThird;

  assert.deepEqual(peer.browserProtocolErrors(), [
    'register before hello',
    `register with a key that is not a padded base64url P-256 point: ${JSON.stringify(vapid.publicKey + 'A')}`,
    `ack of version "nope" never sent on channel ${channelID}`,
  ]);
});
