/**
 * RFC 8291 encryption: the RFC's own example byte for byte, and round trips through an independent
 * decryptor (the npm `http_ece` package, which shares no code with src) using the subscriber's keys.
 */
import assert from 'node:assert/strict';
import { createECDH, randomBytes } from 'node:crypto';
import { test } from 'node:test';

import ece from 'http_ece';

import { encryptWith } from '../src/encrypt.js';
import {
  encrypt,
  encryptedSize,
  HEADER_BYTES,
  InvalidSubscriptionError,
  MAX_BODY_BYTES,
  MAX_PAYLOAD_BYTES,
  PayloadTooLargeError,
  payloadFits,
  RECORD_SIZE,
  validateSubscriptionKeys,
} from '../src/index.js';

// RFC 8291 section 5 (the intermediate values are in Appendix A).
const RFC = {
  plaintext: 'When I grow up, I want to be a watermelon',
  asPrivate: 'yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw',
  asPublic: 'BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8',
  uaPrivate: 'q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94',
  uaPublic: 'BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4',
  authSecret: 'BTBZMqHH6r4Tts7J_aSIgg',
  salt: 'DGv6ra1nlYgDCS1FRnbzlw',
  body:
    'DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_' +
    'yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN',
};

interface Subscriber {
  ecdh: ReturnType<typeof createECDH>;
  keys: { p256dh: string; auth: string };
}

function subscriber(): Subscriber {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return { ecdh, keys: { p256dh: ecdh.getPublicKey('base64url'), auth: randomBytes(16).toString('base64url') } };
}

/** What a browser does with the body: http_ece with the subscriber's private key and auth secret. */
function browserDecrypt(body: Buffer, sub: Subscriber): Buffer {
  return ece.decrypt(body, { version: 'aes128gcm', privateKey: sub.ecdh, authSecret: sub.keys.auth });
}

test('RFC 8291 section 5: fixed salt and sender key give the RFC example body byte for byte', () => {
  const sender = createECDH('prime256v1');
  sender.setPrivateKey(Buffer.from(RFC.asPrivate, 'base64url'));
  assert.equal(sender.getPublicKey('base64url'), RFC.asPublic);
  const body = encryptWith(
    Buffer.from(RFC.plaintext),
    { p256dh: RFC.uaPublic, auth: RFC.authSecret },
    0,
    Buffer.from(RFC.salt, 'base64url'),
    sender,
  );
  assert.equal(body.toString('base64url'), RFC.body);
  assert.equal(body.length, 144);
});

test('the independent decryptor reads the RFC example (so the round trips below mean something)', () => {
  const ua = createECDH('prime256v1');
  ua.setPrivateKey(Buffer.from(RFC.uaPrivate, 'base64url'));
  const plain = ece.decrypt(Buffer.from(RFC.body, 'base64url'), { version: 'aes128gcm', privateKey: ua, authSecret: RFC.authSecret });
  assert.equal(plain.toString(), RFC.plaintext);
});

test('round trip: http_ece decrypts what encrypt produced, for sizes 0..3993 and with padding', () => {
  for (const size of [0, 1, 15, 16, 17, 200, 1000, 4000 - 100, MAX_PAYLOAD_BYTES]) {
    const sub = subscriber();
    const payload = randomBytes(size);
    const body = encrypt(payload, sub.keys);
    assert.equal(body.length, encryptedSize(size));
    assert.deepEqual(browserDecrypt(body, sub), payload, `size ${size}`);
  }
  const sub = subscriber();
  const payload = Buffer.from('{"title":"padded"}');
  const body = encrypt(payload, sub.keys, { padding: 100 });
  assert.equal(body.length, HEADER_BYTES + payload.length + 1 + 100 + 16);
  assert.deepEqual(browserDecrypt(body, sub), payload);
});

test('raw-byte keys are accepted as well as base64url', () => {
  const sub = subscriber();
  const payload = Buffer.from('bytes');
  const body = encrypt(payload, { p256dh: sub.ecdh.getPublicKey(), auth: Buffer.from(sub.keys.auth, 'base64url') });
  assert.deepEqual(browserDecrypt(body, sub), payload);
});

test('header: salt(16) | rs=4096 | idlen=65 | keyid = a valid 65-byte uncompressed point', () => {
  const sub = subscriber();
  const body = encrypt(Buffer.from('hi'), sub.keys);
  assert.equal(body.readUInt32BE(16), RECORD_SIZE);
  assert.equal(RECORD_SIZE, 4096);
  assert.equal(body[20], 65);
  assert.equal(body[21], 0x04);
  assert.doesNotThrow(() => validateSubscriptionKeys({ p256dh: body.subarray(21, 86), auth: randomBytes(16) }));
});

test('every message gets a fresh salt and a fresh ephemeral key (keyid)', () => {
  const sub = subscriber();
  const payload = Buffer.from('same payload');
  const a = encrypt(payload, sub.keys);
  const b = encrypt(payload, sub.keys);
  assert.notDeepEqual(a.subarray(0, 16), b.subarray(0, 16));
  assert.notDeepEqual(a.subarray(21, 86), b.subarray(21, 86));
  assert.deepEqual(browserDecrypt(a, sub), payload);
  assert.deepEqual(browserDecrypt(b, sub), payload);
  // across a refill of the pooled random salts (256 per refill): still all distinct
  const salts = new Set<string>();
  const keyids = new Set<string>();
  for (let i = 0; i < 600; i++) {
    const body = encrypt(payload, sub.keys);
    salts.add(body.subarray(0, 16).toString('hex'));
    keyids.add(body.subarray(21, 86).toString('hex'));
  }
  assert.equal(salts.size, 600);
  assert.equal(keyids.size, 600);
});

test('size limit: 3993 bytes give exactly a 4096-byte body; 3994 are refused', () => {
  assert.equal(MAX_PAYLOAD_BYTES, 3993);
  assert.equal(MAX_BODY_BYTES, 4096);
  const sub = subscriber();
  const largest = randomBytes(MAX_PAYLOAD_BYTES);
  const body = encrypt(largest, sub.keys);
  assert.equal(body.length, 4096);
  assert.deepEqual(browserDecrypt(body, sub), largest);

  assert.throws(() => encrypt(randomBytes(3994), sub.keys), (err: unknown) => {
    assert.ok(err instanceof PayloadTooLargeError);
    assert.equal(err.size, 3994);
    assert.equal(err.limit, 3993);
    return true;
  });
  assert.throws(() => encrypt(randomBytes(3990), sub.keys, { padding: 4 }), PayloadTooLargeError);

  assert.equal(payloadFits(3993), true);
  assert.equal(payloadFits(3994), false);
  assert.equal(payloadFits(Buffer.alloc(3993)), true);
  assert.equal(payloadFits('é'.repeat(1996) + 'a'), true); // 3993 UTF-8 bytes
  assert.equal(payloadFits('é'.repeat(1997)), false); // 3994 UTF-8 bytes
  assert.equal(payloadFits(3990, 3), true);
  assert.equal(payloadFits(3990, 4), false);
  assert.equal(payloadFits(-1), false);
});

test('invalid subscription keys are refused with clear errors', () => {
  const good = subscriber().keys;
  const check = (keys: { p256dh: string | Buffer; auth: string | Buffer }, field: 'p256dh' | 'auth', message: RegExp): void => {
    for (const fn of [() => encrypt(Buffer.from('x'), keys), () => validateSubscriptionKeys(keys)]) {
      assert.throws(fn, (err: unknown) => {
        assert.ok(err instanceof InvalidSubscriptionError, String(err));
        assert.equal(err.field, field);
        assert.match(err.message, message);
        return true;
      });
    }
  };
  const point = Buffer.from(good.p256dh, 'base64url');
  check({ p256dh: point.subarray(0, 64), auth: good.auth }, 'p256dh', /65-byte uncompressed P-256 point.*got 64 bytes/);
  check({ p256dh: Buffer.concat([Buffer.from([0x03]), point.subarray(1)]), auth: good.auth }, 'p256dh', /starting with 0x03/);
  const offCurve = Buffer.alloc(65, 1);
  offCurve[0] = 0x04;
  check({ p256dh: offCurve, auth: good.auth }, 'p256dh', /not a valid point on the P-256 curve/);
  check({ p256dh: good.p256dh, auth: randomBytes(15).toString('base64url') }, 'auth', /auth must be 16 bytes; got 15/);
  check({ p256dh: good.p256dh, auth: '' }, 'auth', /got 0/);
});
