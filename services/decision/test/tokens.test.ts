import assert from 'node:assert/strict';
import { test } from 'node:test';

import { AnswerTokens } from '../src/tokens.js';

// Answer-page tokens: signed question ids that only the holder of the secret can make.

const tokens = new AnswerTokens('a-secret-of-at-least-thirty-two-bytes!');

test('a signed token names its question; every read signs the same link', () => {
  const token = tokens.sign('ask_0123456789abcdef0123456789abcdef');
  assert.match(token, /^ask_0123456789abcdef0123456789abcdef\.[A-Za-z0-9_-]{43}$/);
  assert.equal(tokens.sign('ask_0123456789abcdef0123456789abcdef'), token);
  assert.deepEqual(tokens.verify(token), { questionId: 'ask_0123456789abcdef0123456789abcdef' });
});

test('a link may name its recipient, and an email link the answer it gives; each part is signed', () => {
  const id = 'dec_0123456789abcdef0123456789abcdef';
  const ann = { kind: 'email', id: 'ann@example.com' };
  assert.deepEqual(tokens.verify(tokens.sign(id, ann)), { questionId: id, recipient: ann });
  const approve = tokens.sign(id, ann, 'yes');
  assert.match(approve, /^dec_[0-9a-f]{32}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
  assert.deepEqual(tokens.verify(approve), { questionId: id, recipient: ann, choice: 'yes' });
  // An input question's link names no answer (its page has a text field), which is not the same as naming none at all.
  assert.deepEqual(tokens.verify(tokens.sign(id, ann, '')), { questionId: id, recipient: ann, choice: '' });
  const encode = (text: string) => Buffer.from(text).toString('base64url');
  const [question, recipient, , mac] = approve.split('.');
  // Another answer, another recipient, a dropped or an added part: the MAC no longer matches.
  assert.equal(tokens.verify(`${question}.${recipient}.${encode('c:no')}.${mac}`), undefined);
  assert.equal(tokens.verify(`${question}.${encode('email:mallory@example.com')}.${encode('c:yes')}.${mac}`), undefined);
  assert.equal(tokens.verify(`${question}.${recipient}.${mac}`), undefined);
  assert.equal(tokens.verify(`${question}.${recipient}.${encode('c:yes')}.${encode('c:no')}.${mac}`), undefined);
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
