/**
 * VAPID (RFC 8292): the JWT verifies against the public key with node:crypto (raw r||s), carries exactly
 * aud/exp/sub, is signed once per (key, origin) and renewed before it lapses.
 */
import assert from 'node:assert/strict';
import { createPublicKey, verify } from 'node:crypto';
import { test } from 'node:test';

import { generateVapidKeys, originOf, VapidSigner, type VapidKeys } from '../src/index.js';

const SUBJECT = 'mailto:push-ops@herald.example';
const FCM = 'https://fcm.googleapis.com';
const MOZILLA = 'https://updates.push.services.mozilla.com';
const T0 = Date.UTC(2025, 0, 15, 12, 0, 0, 250);

function keys(): VapidKeys {
  return { ...generateVapidKeys(), subject: SUBJECT };
}

interface Parsed {
  header: unknown;
  claims: { aud: string; exp: number; sub: string };
  input: string;
  signature: Buffer;
  k: string;
  token: string;
}

function parse(authorization: string): Parsed {
  const m = /^vapid t=([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+), k=([A-Za-z0-9_-]+)$/.exec(authorization);
  assert.ok(m, `unexpected Authorization value: ${authorization}`);
  const token = m[1]!;
  const [h, c, s] = token.split('.') as [string, string, string];
  return {
    header: JSON.parse(Buffer.from(h, 'base64url').toString()),
    claims: JSON.parse(Buffer.from(c, 'base64url').toString()) as Parsed['claims'],
    input: `${h}.${c}`,
    signature: Buffer.from(s, 'base64url'),
    k: m[2]!,
    token,
  };
}

function verifies(parsed: Parsed, publicKey: string): boolean {
  const pub = Buffer.from(publicKey, 'base64url');
  const key = createPublicKey({
    format: 'jwk',
    key: { kty: 'EC', crv: 'P-256', x: pub.subarray(1, 33).toString('base64url'), y: pub.subarray(33).toString('base64url') },
  });
  return verify('sha256', Buffer.from(parsed.input), { key, dsaEncoding: 'ieee-p1363' }, parsed.signature);
}

test('the JWT is ES256 over header.claims, raw r||s, verifiable with the public key; claims are exact', () => {
  const k = keys();
  const signer = new VapidSigner({ now: () => T0 });
  const parsed = parse(signer.authorization(k, FCM));
  assert.deepEqual(parsed.header, { typ: 'JWT', alg: 'ES256' });
  assert.deepEqual(Object.keys(parsed.claims).sort(), ['aud', 'exp', 'sub']);
  assert.equal(parsed.claims.aud, FCM);
  assert.equal(parsed.claims.sub, SUBJECT);
  assert.equal(parsed.claims.exp, Math.floor(T0 / 1000) + 12 * 3600);
  assert.ok(parsed.claims.exp - T0 / 1000 <= 24 * 3600);
  assert.equal(parsed.signature.length, 64); // JOSE form, not DER
  assert.equal(parsed.k, k.publicKey);
  assert.equal(verifies(parsed, k.publicKey), true);
  assert.equal(verifies(parsed, generateVapidKeys().publicKey), false);
  // a tampered claim no longer verifies
  const forged = { ...parsed, input: parsed.input.replace(/\.(.*)$/, '.' + Buffer.from(JSON.stringify({ ...parsed.claims, aud: MOZILLA })).toString('base64url')) };
  assert.equal(verifies(forged, k.publicKey), false);
});

test('signed once per (key, origin): same token reused, another origin or key gets its own', () => {
  const k = keys();
  let now = T0;
  const signer = new VapidSigner({ now: () => now });
  const first = signer.authorization(k, FCM);
  now += 5 * 60_000;
  assert.equal(signer.authorization(k, FCM), first);
  assert.equal(signer.authorization({ ...k }, FCM), first); // a copy of the same keys
  const other = signer.authorization(k, MOZILLA);
  assert.notEqual(other, first);
  assert.equal(parse(other).claims.aud, MOZILLA);
  assert.equal(verifies(parse(other), k.publicKey), true);
  const k2 = keys();
  const otherKey = signer.authorization(k2, FCM);
  assert.notEqual(otherKey, first);
  assert.equal(parse(otherKey).k, k2.publicKey);
  assert.equal(signer.size, 3);
});

test('renewed when less than an hour remains; the new token expires 12 h after renewal', () => {
  const k = keys();
  let now = T0;
  const signer = new VapidSigner({ now: () => now });
  const first = signer.authorization(k, FCM);
  const exp = parse(first).claims.exp;
  now = (exp - 3600) * 1000 - 1; // 1 h + 1 ms left
  assert.equal(signer.authorization(k, FCM), first);
  now = (exp - 3600) * 1000; // exactly 1 h left
  const renewed = signer.authorization(k, FCM);
  assert.notEqual(renewed, first);
  assert.equal(parse(renewed).claims.exp, Math.floor(now / 1000) + 12 * 3600);
  assert.equal(verifies(parse(renewed), k.publicKey), true);
  now += 60_000;
  assert.equal(signer.authorization(k, FCM), renewed);
});

test('custom lifetime: at most 24 h; renewal window must be shorter than the lifetime', () => {
  const k = keys();
  const signer = new VapidSigner({ now: () => T0, expiresInSeconds: 24 * 3600, renewBeforeSeconds: 600 });
  assert.equal(parse(signer.authorization(k, FCM)).claims.exp, Math.floor(T0 / 1000) + 24 * 3600);
  assert.throws(() => new VapidSigner({ expiresInSeconds: 24 * 3600 + 1 }), RangeError);
  assert.throws(() => new VapidSigner({ expiresInSeconds: 600, renewBeforeSeconds: 600 }), RangeError);
});

test('the cache is bounded (least recently used goes first)', () => {
  const k = keys();
  const signer = new VapidSigner({ now: () => T0, maxEntries: 2 });
  const a = signer.authorization(k, 'https://a.example');
  signer.authorization(k, 'https://b.example');
  assert.equal(signer.authorization(k, 'https://a.example'), a); // a is now most recent
  signer.authorization(k, 'https://c.example'); // evicts b
  assert.equal(signer.size, 2);
  assert.equal(signer.authorization(k, 'https://a.example'), a);
});

test('bad inputs are refused with clear errors', () => {
  const k = keys();
  const signer = new VapidSigner();
  assert.throws(() => signer.authorization(k, 'https://fcm.googleapis.com/fcm/send/abc'), /origin.*"https:\/\/fcm.googleapis.com"/);
  assert.throws(() => signer.authorization(k, 'https://fcm.googleapis.com/'), /no path or trailing slash/);
  assert.throws(() => signer.authorization(k, 'fcm.googleapis.com'), /must be an origin/);
  assert.throws(() => signer.authorization({ ...k, subject: 'push-ops@herald.example' }, FCM), /mailto: or https:/);
  assert.throws(() => signer.authorization({ ...k, privateKey: generateVapidKeys().privateKey }, FCM), /does not match the public key/);
  assert.throws(() => signer.authorization({ ...k, privateKey: 'AAAA' }, FCM), /32-byte scalar/);
  assert.throws(() => signer.authorization({ ...k, publicKey: k.publicKey.slice(0, 40) }, FCM), /65-byte uncompressed/);
  assert.equal(signer.size, 0);
  assert.equal(originOf('https://fcm.googleapis.com/fcm/send/abc?x=1'), FCM);
  assert.equal(originOf('https://push.example:443/x'), 'https://push.example');
});
