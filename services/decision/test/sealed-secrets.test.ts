import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';

import { HeraldError } from '@herald/errors';

import { CHANNEL_SECRET_KEYS_PATTERN, SecretBox } from '../src/sealed-secrets.js';

// Channel secrets sealed with AES-256-GCM under CHANNEL_SECRET_KEYS: the first key seals, any
// listed key opens (by the key id each sealed value carries), so keys rotate.

const key = () => randomBytes(32).toString('base64');

test('a secret sealed with the first key opens, carries its key id, and differs every time', () => {
  const box = new SecretBox(`k1:${key()}`);
  const sealed = box.seal('xoxb-1-secret');
  assert.match(sealed, /^k1:[A-Za-z0-9+/]+=*$/);
  assert.ok(!Buffer.from(sealed.slice(3), 'base64').toString('latin1').includes('xoxb'));
  assert.notEqual(box.seal('xoxb-1-secret'), sealed);
  assert.equal(box.open(sealed), 'xoxb-1-secret');
});

test('rotation: a new key first seals, the old one still opens; once dropped, its values do not', () => {
  const [old, fresh] = [key(), key()];
  const before = new SecretBox(`k1:${old}`).seal('signing-secret');
  const rotating = new SecretBox(`k2:${fresh},k1:${old}`);
  assert.equal(rotating.open(before), 'signing-secret');
  const after = rotating.seal('signing-secret');
  assert.match(after, /^k2:/);
  const rotated = new SecretBox(`k2:${fresh}`);
  assert.equal(rotated.open(after), 'signing-secret');
  assert.throws(() => rotated.open(before), /sealed with the key "k1", which CHANNEL_SECRET_KEYS no longer lists/);
});

test('an altered value, or one moved to another key id, does not open', () => {
  const [a, b] = [key(), key()];
  const box = new SecretBox(`k1:${a},k0:${b}`);
  const sealed = box.seal('xoxb-1-secret');
  const bytes = Buffer.from(sealed.slice(3), 'base64');
  bytes[bytes.length - 20] = (bytes[bytes.length - 20] ?? 0) ^ 1;
  assert.throws(() => box.open(`k1:${bytes.toString('base64')}`));
  // The key id is authenticated too: the same bytes under another id fail even with a key that exists.
  assert.throws(() => box.open(`k0:${sealed.slice(3)}`));
});

test('without keys nothing is sealed (503); the configuration pattern', () => {
  assert.throws(
    () => new SecretBox('').seal('x'),
    (err: unknown) => err instanceof HeraldError && err.code === 'unavailable' && err.message === 'Channel secrets cannot be stored: the decision service has no CHANNEL_SECRET_KEYS.',
  );
  for (const good of ['', `k1:${key()}`, `k2:${key()},k1:${key()}`]) assert.ok(CHANNEL_SECRET_KEYS_PATTERN.test(good), good);
  for (const bad of ['k1', `k1:${randomBytes(16).toString('base64')}`, `:${key()}`, `k1:${key()},`, `k 1:${key()}`]) assert.ok(!CHANNEL_SECRET_KEYS_PATTERN.test(bad), bad);
});
