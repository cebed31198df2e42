/**
 * Verify mode over HTTPS/HTTP/2: a valid message is accepted and decrypted exactly; RFC 8291's own
 * example decrypts; every rejection path answers its exact status and code; Topic replacement.
 */
import assert from 'node:assert/strict';
import { createECDH } from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { deriveKeys, startPushPeer, type PushPeer, type PushSubscriptionJSON } from '../src/index.js';
import { b64, claimsFor, encrypt, H2, makeVapidKeys, pathOf, signJwt, unb64, vapidAuthorization, reply, type Outcome, type Reply, type VapidKeys } from './sender.js';

// RFC 8291 section 5 and Appendix A.
const RFC = {
  plaintext: 'When I grow up, I want to be a watermelon',
  asPublic: 'BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8',
  uaPrivate: 'q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94',
  uaPublic: 'BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4',
  auth: 'BTBZMqHH6r4Tts7J_aSIgg',
  salt: 'DGv6ra1nlYgDCS1FRnbzlw',
  ecdhSecret: 'kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs',
  prkKey: 'Snr3JMxaHVDXHWJn5wdC52WjpCtd2EIEGBykDcZW32k',
  ikm: 'S4lYMb_L0FxCeq0WhDx813KgSYqU26kOyzWUdsXYyrg',
  prk: '09_eUZGrsvxChDCGRCdkLiDXrReGOEVeSCdCcPBSJSc',
  cek: 'oIhVW04MRdy2XN9CiKLxTg',
  nonce: '4h_95klXJ5E_qnoN',
  body:
    'DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN',
};

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

interface SendOptions {
  readonly headers?: Readonly<Record<string, string | undefined>>;
  readonly body?: Buffer;
  readonly plaintext?: string;
}


/** POSTs a valid message (TTL 60, aes128gcm, fresh VAPID token) unless options say otherwise. */
async function send(sub: PushSubscriptionJSON, options: SendOptions = {}): Promise<Reply> {
  const headers: Record<string, string> = {};
  const all = {
    ttl: '60',
    'content-encoding': 'aes128gcm',
    'content-type': 'application/octet-stream',
    authorization: vapidAuthorization(vapid, peer.origin),
    ...options.headers,
  };
  for (const [name, value] of Object.entries(all)) if (value !== undefined) headers[name] = value;
  const body = options.body ?? encrypt(Buffer.from(options.plaintext ?? 'hello'), sub.keys);
  return reply(await client.request('POST', pathOf(sub.endpoint), headers, body));
}

describe('accepting', () => {
  test('a valid message: 201 with Location and TTL, the exact plaintext and metadata recorded', async () => {
    const sub = peer.createSubscription();
    assert.match(sub.endpoint, new RegExp(`^${peer.origin.replace(/[.]/g, '\\.')}/push/[A-Za-z0-9_-]+$`));
    assert.equal(unb64(sub.keys.p256dh).length, 65);
    assert.equal(unb64(sub.keys.auth).length, 16);
    assert.equal(sub.expirationTime, null);
    const plaintext = '{"title":"Approve deploy #42?","body":"ünïcödé ✓"}';
    const before = Date.now();
    const res = await send(sub, { plaintext, headers: { ttl: '3600', urgency: 'high', topic: 'deploy-42' } });
    assert.equal(res.status, 201);
    assert.match(String(res.headers['location']), new RegExp(`^${peer.origin.replace(/[.]/g, '\\.')}/message/[0-9a-z]+$`));
    assert.equal(res.headers['ttl'], '3600');
    const [message, ...rest] = peer.received(sub.endpoint);
    assert.equal(rest.length, 0);
    assert.ok(message);
    assert.equal(message.plaintext.toString('utf8'), plaintext);
    assert.deepEqual(message.plaintext, Buffer.from(plaintext));
    assert.equal(message.endpoint, sub.endpoint);
    assert.equal(message.location, res.headers['location']);
    assert.equal(message.ttl, 3600);
    assert.equal(message.urgency, 'high');
    assert.equal(message.topic, 'deploy-42');
    assert.equal(message.httpVersion, '2.0');
    assert.equal(message.rs, 4096);
    assert.equal(message.paddingLength, 0);
    assert.equal(message.vapid.aud, peer.origin);
    assert.equal(message.vapid.sub, 'mailto:push-tests@herald.example');
    assert.equal(message.vapid.publicKey, vapid.publicKey);
    assert.ok(message.vapid.exp > Date.now() / 1000);
    assert.ok(message.at >= before - 5 && message.at <= Date.now() + 5);
    assert.equal(peer.acceptedCountFor(sub.endpoint), 1);
    const [attempt] = peer.attempts(sub.endpoint);
    assert.equal(attempt?.status, 201);
    assert.equal(attempt?.method, 'POST');
  });

  test('absent Urgency and Topic are recorded as undefined; padding is stripped up to the 0x02 delimiter', async () => {
    const sub = peer.createSubscription();
    const res = await send(sub, { body: encrypt(Buffer.from('padded'), sub.keys, { padding: 100, rs: 200 }) });
    assert.equal(res.status, 201);
    const [message] = peer.received(sub.endpoint);
    assert.equal(message?.plaintext.toString(), 'padded');
    assert.equal(message?.paddingLength, 100);
    assert.equal(message?.rs, 200);
    assert.equal(message?.urgency, undefined);
    assert.equal(message?.topic, undefined);
  });

  test('accepted VAPID variants: no typ, quoted auth-params, any-case scheme, exp exactly 24 h ahead, https: sub', async () => {
    const sub = peer.createSubscription();
    const t = (claims: Record<string, unknown>, header?: Record<string, unknown>) => signJwt(vapid.privateKey, claimsFor(peer.origin, claims), header);
    const variants = [
      `vapid t=${t({}, { alg: 'ES256' })}, k=${vapid.publicKey}`,
      `vapid t="${t({})}", k="${vapid.publicKey}"`,
      `Vapid k=${vapid.publicKey},t=${t({})}`,
      `vapid t=${t({ exp: Math.floor(Date.now() / 1000) + 24 * 3600 })}, k=${vapid.publicKey}`,
      `vapid t=${t({ sub: 'https://herald.example/contact' })}, k=${vapid.publicKey}`,
    ];
    for (const authorization of variants) {
      const res = await send(sub, { headers: { authorization } });
      assert.equal(res.status, 201, `${authorization.slice(0, 30)}: ${res.text}`);
    }
    assert.equal(peer.received(sub.endpoint)[4]?.vapid.sub, 'https://herald.example/contact');
  });

  test('an empty plaintext and a 4096-octet body (the most RFC 8030 lets a service refuse below) are accepted', async () => {
    const sub = peer.createSubscription();
    assert.equal((await send(sub, { plaintext: '' })).status, 201);
    const max = Buffer.alloc(4096 - 86 - 16 - 1, 'x'); // 3993 octets of plaintext
    const body = encrypt(max, sub.keys);
    assert.equal(body.length, 4096);
    assert.equal((await send(sub, { body })).status, 201);
    assert.deepEqual(peer.received(sub.endpoint).map((m) => m.plaintext.length), [0, 3993]);
  });

  test('the RFC 8291 section 5 example message decrypts to the watermelon sentence', async () => {
    const sub = peer.createSubscription({ privateKey: RFC.uaPrivate, auth: RFC.auth });
    assert.equal(sub.keys.p256dh, RFC.uaPublic);
    assert.equal(sub.keys.auth, RFC.auth);
    const res = await send(sub, { body: unb64(RFC.body) });
    assert.equal(res.status, 201, res.text);
    const [message] = peer.received(sub.endpoint);
    assert.equal(message?.plaintext.toString('utf8'), RFC.plaintext);
    assert.equal(message?.senderPublicKey, RFC.asPublic);
    assert.equal(message?.rs, 4096);
    assert.equal(message?.bodyLength, 144);
  });

  test('the key schedule reproduces every RFC 8291 Appendix A intermediate value', () => {
    const ua = createECDH('prime256v1');
    ua.setPrivateKey(unb64(RFC.uaPrivate));
    const ecdhSecret = ua.computeSecret(unb64(RFC.asPublic));
    assert.equal(b64(ecdhSecret), RFC.ecdhSecret);
    const keys = deriveKeys(ecdhSecret, unb64(RFC.auth), unb64(RFC.uaPublic), unb64(RFC.asPublic), unb64(RFC.salt));
    assert.equal(b64(keys.prkKey), RFC.prkKey);
    assert.equal(b64(keys.ikm), RFC.ikm);
    assert.equal(b64(keys.prk), RFC.prk);
    assert.equal(b64(keys.cek), RFC.cek);
    assert.equal(b64(keys.nonce), RFC.nonce);
  });

  test('the test encryptor, given the RFC sender key and salt, produces the RFC body byte for byte', () => {
    const asPrivate = unb64('yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw');
    const body = encrypt(Buffer.from(RFC.plaintext), { p256dh: RFC.uaPublic, auth: RFC.auth }, { senderPrivateKey: asPrivate, salt: unb64(RFC.salt) });
    assert.equal(b64(body), RFC.body);
  });

  test('h2c (cleartext HTTP/2, prior knowledge) mode accepts with an http:// origin as aud', async () => {
    const plain = await startPushPeer({ tls: false });
    const h2c = new H2(plain.origin);
    try {
      assert.match(plain.origin, /^http:\/\/127\.0\.0\.1:\d+$/);
      assert.equal(plain.ca, undefined);
      const sub = plain.createSubscription();
      const res = reply(
        await h2c.request(
          'POST',
          pathOf(sub.endpoint),
          { ttl: '0', 'content-encoding': 'aes128gcm', authorization: vapidAuthorization(vapid, plain.origin) },
          encrypt(Buffer.from('over h2c'), sub.keys),
        ),
      );
      assert.equal(res.status, 201);
      assert.equal(plain.received(sub.endpoint)[0]?.plaintext.toString(), 'over h2c');
    } finally {
      await h2c.close();
      await plain.close();
    }
  });
});

describe('rejecting', () => {
  const now = () => Math.floor(Date.now() / 1000);
  const token = (claims: Record<string, unknown>, header?: Record<string, unknown>, keys: VapidKeys = vapid) => signJwt(keys.privateKey, claims, header);
  const auth = (claims: Record<string, unknown>, header?: Record<string, unknown>) => `vapid t=${token(claims, header)}, k=${vapid.publicKey}`;

  const cases: { name: string; status: number; error: string; options: (sub: PushSubscriptionJSON) => SendOptions }[] = [
    { name: 'no Authorization', status: 401, error: 'missing_authorization', options: () => ({ headers: { authorization: undefined } }) },
    { name: 'a non-vapid scheme (legacy WebPush)', status: 401, error: 'not_vapid', options: () => ({ headers: { authorization: `WebPush ${token(claimsFor(peer.origin))}` } }) },
    { name: 'vapid without k', status: 403, error: 'missing_key', options: () => ({ headers: { authorization: `vapid t=${token(claimsFor(peer.origin))}` } }) },
    { name: 'vapid without t', status: 403, error: 'missing_token', options: () => ({ headers: { authorization: `vapid k=${vapid.publicKey}` } }) },
    {
      name: 'a signature by another key',
      status: 403,
      error: 'bad_signature',
      options: () => ({ headers: { authorization: `vapid t=${token(claimsFor(peer.origin), undefined, makeVapidKeys())}, k=${vapid.publicKey}` } }),
    },
    {
      name: 'a tampered payload',
      status: 403,
      error: 'bad_signature',
      options: () => {
        const [h, , s] = token(claimsFor(peer.origin)).split('.');
        const forged = b64(Buffer.from(JSON.stringify(claimsFor(peer.origin, { sub: 'mailto:evil@example.com' }))));
        return { headers: { authorization: `vapid t=${h}.${forged}.${s}, k=${vapid.publicKey}` } };
      },
    },
    {
      name: 'a DER-encoded signature instead of raw r||s',
      status: 403,
      error: 'bad_signature',
      options: () => ({ headers: { authorization: `vapid t=${signJwt(vapid.privateKey, claimsFor(peer.origin), undefined, 'der')}, k=${vapid.publicKey}` } }),
    },
    { name: 'alg ES384', status: 403, error: 'bad_alg', options: () => ({ headers: { authorization: auth(claimsFor(peer.origin), { typ: 'JWT', alg: 'ES384' }) } }) },
    { name: 'typ other than JWT', status: 403, error: 'bad_typ', options: () => ({ headers: { authorization: auth(claimsFor(peer.origin), { typ: 'JOSE', alg: 'ES256' }) } }) },
    { name: 'a k that is not a P-256 point', status: 403, error: 'bad_key', options: () => ({ headers: { authorization: `vapid t=${token(claimsFor(peer.origin))}, k=${b64(Buffer.concat([Buffer.from([4]), Buffer.alloc(64, 1)]))}` } }) },
    { name: 'a wrong aud (another origin)', status: 403, error: 'bad_aud', options: () => ({ headers: { authorization: auth(claimsFor('https://push.example.net')) } }) },
    { name: 'an aud with a trailing slash', status: 403, error: 'bad_aud', options: () => ({ headers: { authorization: auth(claimsFor(`${peer.origin}/`)) } }) },
    { name: 'an aud naming localhost instead of 127.0.0.1', status: 403, error: 'bad_aud', options: () => ({ headers: { authorization: auth(claimsFor(peer.origin.replace('127.0.0.1', 'localhost'))) } }) },
    { name: 'an expired exp', status: 403, error: 'expired', options: () => ({ headers: { authorization: auth(claimsFor(peer.origin, { exp: now() - 60 })) } }) },
    { name: 'exp more than 24 h ahead', status: 403, error: 'exp_too_far', options: () => ({ headers: { authorization: auth(claimsFor(peer.origin, { exp: now() + 24 * 3600 + 60 })) } }) },
    { name: 'exp as a string', status: 403, error: 'bad_exp', options: () => ({ headers: { authorization: auth(claimsFor(peer.origin, { exp: String(now() + 60) })) } }) },
    { name: 'no sub', status: 403, error: 'bad_sub', options: () => ({ headers: { authorization: auth(claimsFor(peer.origin, { sub: undefined })) } }) },
    { name: 'an http: sub', status: 403, error: 'bad_sub', options: () => ({ headers: { authorization: auth(claimsFor(peer.origin, { sub: 'http://herald.example' })) } }) },
    { name: 'no TTL', status: 400, error: 'missing_ttl', options: () => ({ headers: { ttl: undefined } }) },
    { name: 'a negative TTL', status: 400, error: 'bad_ttl', options: () => ({ headers: { ttl: '-1' } }) },
    { name: 'a fractional TTL', status: 400, error: 'bad_ttl', options: () => ({ headers: { ttl: '1.5' } }) },
    { name: 'no Content-Encoding', status: 415, error: 'unsupported_content_encoding', options: () => ({ headers: { 'content-encoding': undefined } }) },
    { name: 'Content-Encoding aesgcm (the old draft)', status: 415, error: 'unsupported_content_encoding', options: () => ({ headers: { 'content-encoding': 'aesgcm' } }) },
    { name: 'an unknown Urgency', status: 400, error: 'bad_urgency', options: () => ({ headers: { urgency: 'urgent' } }) },
    { name: 'an upper-case Urgency', status: 400, error: 'bad_urgency', options: () => ({ headers: { urgency: 'HIGH' } }) },
    { name: 'a 33-character Topic', status: 400, error: 'bad_topic', options: () => ({ headers: { topic: 'a'.repeat(33) } }) },
    { name: 'a Topic outside base64url', status: 400, error: 'bad_topic', options: () => ({ headers: { topic: 'deploy.42' } }) },
    { name: 'a body encrypted for another subscription', status: 400, error: 'decryption_failed', options: () => ({ body: encrypt(Buffer.from('x'), peer.createSubscription().keys) }) },
    { name: 'a body with a wrong auth secret', status: 400, error: 'decryption_failed', options: (sub) => ({ body: encrypt(Buffer.from('x'), { p256dh: sub.keys.p256dh, auth: b64(Buffer.alloc(16)) }) }) },
    {
      name: 'a corrupted ciphertext',
      status: 400,
      error: 'decryption_failed',
      options: (sub) => {
        const body = encrypt(Buffer.from('hello'), sub.keys);
        body[body.length - 20]! ^= 1;
        return { body };
      },
    },
    { name: 'a truncated body', status: 400, error: 'truncated_header', options: (sub) => ({ body: encrypt(Buffer.from('x'), sub.keys).subarray(0, 50) }) },
    { name: 'an empty body', status: 400, error: 'truncated_header', options: () => ({ body: Buffer.alloc(0) }) },
    { name: 'an empty keyid', status: 400, error: 'bad_keyid', options: (sub) => ({ body: encrypt(Buffer.from('x'), sub.keys, { keyid: Buffer.alloc(0) }) }) },
    { name: 'rs not greater than the record', status: 400, error: 'not_single_record', options: (sub) => ({ body: encrypt(Buffer.from('hello'), sub.keys, { rs: 5 + 1 + 16 }) }) },
    { name: 'a 0x01 (non-final) delimiter', status: 400, error: 'bad_padding', options: (sub) => ({ body: encrypt(Buffer.from('x'), sub.keys, { delimiter: 0x01 }) }) },
    {
      name: 'the VAPID key reused as the ECDH key (RFC 8292 section 3.2)',
      status: 400,
      error: 'same_key_for_ecdh_and_vapid',
      options: (sub) => {
        const jwk = vapid.privateKey.export({ format: 'jwk' });
        return { body: encrypt(Buffer.from('x'), sub.keys, { senderPrivateKey: unb64(jwk.d!) }) };
      },
    },
    { name: 'a declared Content-Length over 4096', status: 413, error: 'payload_too_large', options: (sub) => ({ headers: { 'content-length': '4097' }, body: encrypt(Buffer.alloc(3994), sub.keys) }) },
    { name: 'a 4097-octet body', status: 413, error: 'payload_too_large', options: (sub) => ({ body: encrypt(Buffer.alloc(3994), sub.keys) }) },
  ];

  for (const c of cases) {
    test(`${c.name}: ${c.status} ${c.error}`, async () => {
      const sub = peer.createSubscription();
      const res = await send(sub, c.options(sub));
      assert.equal(res.status, c.status, res.text);
      assert.equal(res.error, c.error, res.text);
      assert.equal(res.headers['content-type'], 'application/json');
      assert.deepEqual(peer.received(sub.endpoint), []);
      assert.equal(peer.acceptedCountFor(sub.endpoint), 0);
      const attempts = peer.attempts(sub.endpoint);
      assert.deepEqual(
        attempts.map((a) => [a.status, a.error]),
        [[c.status, c.error]],
      );
      if (c.status === 401) assert.equal(res.headers['www-authenticate'], 'vapid');
    });
  }

  test('a key other than the applicationServerKey the subscription was created with: 403 vapid_key_mismatch', async () => {
    const sub = peer.createSubscription({ applicationServerKey: vapid.publicKey });
    assert.equal(peer.subscriptionFor(sub.endpoint)?.applicationServerKey, vapid.publicKey);
    const other = makeVapidKeys();
    const res = await send(sub, { headers: { authorization: vapidAuthorization(other, peer.origin) } });
    assert.equal(res.status, 403);
    assert.equal(res.error, 'vapid_key_mismatch');
    // ...and the right key is accepted.
    assert.equal((await send(sub)).status, 201);
  });

  test('an unknown endpoint: 404; other paths: 404', async () => {
    const ghost = { endpoint: `${peer.origin}/push/uDoesNotExist000000000`, expirationTime: null, keys: peer.createSubscription().keys };
    const res = await send(ghost);
    assert.equal(res.status, 404);
    assert.equal(res.error, 'unknown_subscription');
    const other = reply(await client.request('GET', '/somewhere'));
    assert.equal(other.status, 404);
  });

  test('a method other than POST: 405 with Allow', async () => {
    const sub = peer.createSubscription();
    const res = reply(await client.request('GET', pathOf(sub.endpoint)));
    assert.equal(res.status, 405);
    assert.equal(res.headers['allow'], 'POST');
  });

  test('an expired subscription: 410 (or 404 when asked), with state visible', async () => {
    const sub = peer.createSubscription();
    assert.equal((await send(sub)).status, 201);
    peer.expireSubscription(sub.endpoint);
    assert.equal(peer.subscriptionFor(sub.endpoint)?.state, 410);
    const res = await send(sub);
    assert.equal(res.status, 410);
    assert.equal(res.error, 'subscription_expired');
    peer.expireSubscription(sub.endpoint, 404);
    assert.equal((await send(sub)).status, 404);
  });
});

describe('Topic replacement (RFC 8030 section 5.4)', () => {
  test('a message with the Topic of a still-stored one replaces it; acceptedCount counts both', async () => {
    const sub = peer.createSubscription();
    const other = peer.createSubscription();
    const startAccepted = peer.acceptedCount;
    const startStats = peer.stats();
    const first = await send(sub, { plaintext: 'v1', headers: { topic: 'status', ttl: '600' } });
    const unrelated = await send(sub, { plaintext: 'other topic', headers: { topic: 'other', ttl: '600' } });
    const elsewhere = await send(other, { plaintext: 'same topic, other subscription', headers: { topic: 'status', ttl: '600' } });
    const second = await send(sub, { plaintext: 'v2', headers: { topic: 'status', ttl: '600' } });
    for (const r of [first, unrelated, elsewhere, second]) assert.equal(r.status, 201);
    assert.deepEqual(peer.received(sub.endpoint).map((m) => m.plaintext.toString()), ['other topic', 'v2']);
    const all = peer.received(sub.endpoint, { includeReplaced: true });
    assert.deepEqual(all.map((m) => m.plaintext.toString()), ['v1', 'other topic', 'v2']);
    assert.equal(all[2]?.replaces, all[0]?.id);
    assert.equal(all[0]?.replacedBy, all[2]?.id);
    assert.deepEqual(peer.received(other.endpoint).map((m) => m.plaintext.toString()), ['same topic, other subscription']);
    assert.equal(peer.acceptedCount - startAccepted, 4);
    assert.equal(peer.acceptedCountFor(sub.endpoint), 3);
    const stats = peer.stats();
    assert.equal(stats.accepted - startStats.accepted, 4);
    assert.equal(stats.replaced - startStats.replaced, 1);
    assert.equal(stats.stored - startStats.stored, 3);
  });

  test('a message whose TTL has run out is no longer stored, so it is not replaced (TTL 0 is never stored)', async () => {
    const sub = peer.createSubscription();
    assert.equal((await send(sub, { plaintext: 'gone at once', headers: { topic: 't', ttl: '0' } })).status, 201);
    assert.equal((await send(sub, { plaintext: 'next', headers: { topic: 't', ttl: '60' } })).status, 201);
    assert.deepEqual(peer.received(sub.endpoint).map((m) => m.plaintext.toString()), ['gone at once', 'next']);
  });
});
