import assert from 'node:assert/strict';
import { test } from 'node:test';

import { AnswerTokens } from '../src/tokens.js';

// Answer-page tokens: signed question ids that only the holder of the secret can make.

const tokens = new AnswerTokens('a-secret-of-at-least-thirty-two-bytes!');

test('a signed token names its question; every read signs the same link', () => {
  const token = tokens.sign('ask_0123456789abcdef0123456789abcdef');
  assert.match(token, /^ask_0123456789abcdef0123456789abcdef\.[A-Za-z0-9_-]{43}$/);
  assert.equal(tokens.sign('ask_0123456789abcdef0123456789abcdef'), token);
  assert.equal(tokens.verify(token), 'ask_0123456789abcdef0123456789abcdef');
});

test('forged, altered, truncated and foreign tokens name nothing', () => {
  const token = tokens.sign('dec_0123456789abcdef0123456789abcdef');
  const mac = token.slice(token.indexOf('.') + 1);
  assert.equal(tokens.verify(`dec_0123456789abcdef0123456789abcdee.${mac}`), undefined);
  const flip = (char: string) => (char === 'A' ? 'B' : 'A');
  assert.equal(tokens.verify(`${token.slice(0, 10)}${flip(token.charAt(10))}${token.slice(11)}`), undefined);
  // The last character too, even where base64url's unused low bits would decode to the same MAC.
  assert.equal(tokens.verify(`${token.slice(0, -1)}${flip(token.charAt(token.length - 1))}`), undefined);
  assert.equal(tokens.verify(token.slice(0, -2)), undefined);
  assert.equal(tokens.verify('dec_0123456789abcdef0123456789abcdef'), undefined);
  assert.equal(tokens.verify(`.${mac}`), undefined);
  assert.equal(tokens.verify(''), undefined);
  assert.equal(new AnswerTokens('another-secret-of-at-least-32-bytes').verify(token), undefined);
});

test('a secret shorter than 32 bytes is refused', () => {
  assert.throws(() => new AnswerTokens('too short'), /ANSWER_TOKEN_SECRET must be at least 32 bytes/);
});
