import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';

import { Webhook } from 'standardwebhooks';

import { verifyWebhook, WebhookVerificationError } from '../src/index.js';

// verifyWebhook against signatures made by the reference Standard Webhooks library.

const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;
const body = JSON.stringify({ type: 'decision.answered', timestamp: '2026-11-23T15:00:00.000Z', data: { decisionId: 'dec_1', approved: true } });

function signed(secrets: string[], { at = new Date(), payload = body, id = 'msg_0123456789abcdefghijklmn' } = {}) {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1_000)),
    'webhook-signature': secrets.map((secret) => new Webhook(secret).sign(id, at, payload)).join(' '),
  };
}

const refused = (message: string) => (err: unknown) => err instanceof WebhookVerificationError && err.message === message;

test('a webhook signed by the reference library verifies and its body is returned', () => {
  const secret = newSecret();
  const headers = signed([secret]);
  assert.deepEqual(verifyWebhook(secret, headers, body), JSON.parse(body));
  // The reference library agrees about the same headers.
  assert.deepEqual(new Webhook(secret).verify(body, headers), JSON.parse(body));
  // Fetch's Headers, a raw Buffer body, and a secret without the whsec_ prefix work too.
  assert.deepEqual(verifyWebhook(secret.slice('whsec_'.length), new Headers(headers), Buffer.from(body)), JSON.parse(body));
  // Header names are case-insensitive.
  const upper = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toUpperCase(), value]));
  assert.deepEqual(verifyWebhook(secret, upper, body), JSON.parse(body));
});

test('during a rotation: two signatures, and either secret the receiver holds verifies', () => {
  const previous = newSecret();
  const current = newSecret();
  const headers = signed([current, previous]);
  assert.equal(headers['webhook-signature'].split(' ').length, 2);
  for (const held of [[current], [previous], [newSecret(), previous], [current, previous]]) {
    assert.deepEqual(verifyWebhook(held, headers, body), JSON.parse(body));
  }
  assert.throws(() => verifyWebhook([newSecret(), newSecret()], headers, body), refused('No matching webhook signature'));
});

test('a wrong secret, a changed body, id or timestamp, or a missing header is refused', () => {
  const secret = newSecret();
  const headers = signed([secret]);
  assert.throws(() => verifyWebhook(newSecret(), headers, body), refused('No matching webhook signature'));
  assert.throws(() => verifyWebhook(secret, headers, body.replace('true', 'false')), refused('No matching webhook signature'));
  assert.throws(() => verifyWebhook(secret, { ...headers, 'webhook-id': 'msg_other' }, body), refused('No matching webhook signature'));
  const oneSecondLater = String(Number(headers['webhook-timestamp']) + 1);
  assert.throws(() => verifyWebhook(secret, { ...headers, 'webhook-timestamp': oneSecondLater }, body), refused('No matching webhook signature'));
  assert.throws(() => verifyWebhook(secret, { ...headers, 'webhook-signature': headers['webhook-signature'].replace('v1,', 'v2,') }, body), refused('No matching webhook signature'));
  assert.throws(() => verifyWebhook(secret, { ...headers, 'webhook-signature': 'v1,' }, body), refused('No matching webhook signature'));
  for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const) {
    const { [name]: _dropped, ...rest } = headers;
    assert.throws(() => verifyWebhook(secret, rest, body), refused(`Missing ${name} header`));
  }
  assert.throws(() => verifyWebhook(secret, { ...headers, 'webhook-timestamp': 'soon' }, body), refused('Invalid webhook-timestamp header'));
});

test('the timestamp must be within the tolerance either way (default 300 s)', () => {
  const secret = newSecret();
  const now = Date.now();
  const at = (offsetSeconds: number) => signed([secret], { at: new Date(now + offsetSeconds * 1_000) });
  assert.deepEqual(verifyWebhook(secret, at(-299), body, { now }), JSON.parse(body));
  assert.deepEqual(verifyWebhook(secret, at(299), body, { now }), JSON.parse(body));
  assert.throws(() => verifyWebhook(secret, at(-301), body, { now }), refused('The webhook timestamp is outside the tolerance'));
  assert.throws(() => verifyWebhook(secret, at(301), body, { now }), refused('The webhook timestamp is outside the tolerance'));
  assert.deepEqual(verifyWebhook(secret, at(-3_000), body, { now, toleranceSeconds: 3_600 }), JSON.parse(body));
  assert.throws(() => verifyWebhook(secret, at(-31), body, { now, toleranceSeconds: 30 }), refused('The webhook timestamp is outside the tolerance'));
});
