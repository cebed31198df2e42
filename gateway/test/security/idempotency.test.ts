import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, connectDatabase, createKey, createWorkspace, pushSubscription, SERVER_API, startStack, type Stack, type TestWorkspace } from '@herald/testkit';

import { recordTried, reportTried } from './suite.js';

// Issue #22, finding 3: idempotency keys were shared by every key of a workspace, so an end-user's
// bound key could claim one first (the dashboard's decision then answered 409) and probe which keys
// others had used. Now an idempotency key is the calling API key's own, for decisions and /send.

let stack: Stack;
let partner: TestWorkspace;

before(async () => {
  stack = await startStack({ decisions: true, services: ['campaign'], gatewayEnv: { ALLOW_ANY_PUSH_SERVICE: 'true' } });
  partner = await createWorkspace('partner');
});
after(async () => {
  reportTried('idempotency');
  await stack.stop();
});

interface DecisionAnswer {
  decisionId: string;
  duplicate: boolean;
}

const decide = (key: string, body: Record<string, unknown>, idempotencyKey: string) =>
  call<DecisionAnswer & Record<string, unknown>>(stack.gatewayUrl, `${SERVER_API}/decisions`, { method: 'POST', key, body, headers: { 'idempotency-key': idempotencyKey } });

test("finding 3: an end-user's bound key claiming the dashboard's idempotency key first neither blocks nor reveals the dashboard's decision", async () => {
  const bound = await createKey(partner.workspaceId, 'bound', '--external-id', 'mallory');
  // The attacker claims the key first.
  recordTried('idempotency key claimed by another principal');
  const claimed = await decide(bound.apiKey, { question: 'Anything?' }, 'deploy-2026-11-27');
  assert.deepEqual([claimed.status, claimed.body.duplicate], [200, false]);
  // The dashboard's decision with that key is opened (before: 409 conflict).
  const dashboard = await decide(partner.apiKey, { question: 'Deploy to production?', externalId: 'alice' }, 'deploy-2026-11-27');
  assert.deepEqual([dashboard.status, dashboard.body.duplicate], [200, false], JSON.stringify(dashboard.body));
  assert.notEqual(dashboard.body.decisionId, claimed.body.decisionId);
  // Probing: the attacker replays the dashboard's exact request with the dashboard's key; it gets a
  // decision of its own (for its own end-user), neither the dashboard's nor a 409 saying it was used.
  recordTried('idempotency key probed by another principal', 2);
  const probe = await decide(bound.apiKey, { question: 'Deploy to production?' }, 'deploy-2026-11-27');
  assert.equal(probe.status, 409, 'its own earlier use of the key, with another body');
  const fresh = await decide(bound.apiKey, { question: 'Deploy to production?' }, 'dashboard-key-guess');
  assert.deepEqual([fresh.status, fresh.body.duplicate], [200, false]);
  assert.notEqual(fresh.body.decisionId, dashboard.body.decisionId);
  // Each key still replays its own: the same request, the first decision.
  const replay = await decide(partner.apiKey, { question: 'Deploy to production?', externalId: 'alice' }, 'deploy-2026-11-27');
  assert.deepEqual([replay.status, replay.body.decisionId, replay.body.duplicate], [200, dashboard.body.decisionId, true]);
  const boundReplay = await decide(bound.apiKey, { question: 'Anything?' }, 'deploy-2026-11-27');
  assert.deepEqual([boundReplay.status, boundReplay.body.decisionId, boundReplay.body.duplicate], [200, claimed.body.decisionId, true]);
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<{ question: string; external_id: string; key_id: string }>(
      'SELECT question, external_id, key_id FROM decision.questions WHERE workspace_id = $1 ORDER BY created_at',
      [partner.workspaceId],
    );
    assert.deepEqual(
      rows.map((row) => [row.question, row.external_id, row.key_id === bound.keyId ? 'bound' : 'dashboard']),
      [
        ['Anything?', 'mallory', 'bound'],
        ['Deploy to production?', 'alice', 'dashboard'],
        ['Deploy to production?', 'mallory', 'bound'],
      ],
    );
  } finally {
    await db.end();
  }
});

test('finding 3: /send idempotency keys are each API key\'s own', async () => {
  const growth = await createWorkspace('growth');
  const subscribed = await call(stack.gatewayUrl, '/api/v1/subscribe', { method: 'POST', key: growth.siteKey, headers: { origin: 'https://example.test' }, body: pushSubscription() });
  assert.equal(subscribed.status, 201, JSON.stringify(subscribed.body));
  const other = await createKey(growth.workspaceId, 'runtime');
  const send = (key: string, title: string) =>
    call<{ campaignId: string; duplicate: boolean }>(stack.gatewayUrl, `${SERVER_API}/send`, { method: 'POST', key, body: { title, body: 'Body' }, headers: { 'idempotency-key': 'release-42' } });
  const first = await send(growth.apiKey, 'Release 42 is out');
  assert.deepEqual([first.status, first.body.duplicate], [200, false], JSON.stringify(first.body));
  recordTried('idempotency key claimed by another principal');
  const second = await send(other.apiKey, 'Something else');
  assert.deepEqual([second.status, second.body.duplicate], [200, false], JSON.stringify(second.body));
  assert.notEqual(second.body.campaignId, first.body.campaignId);
  const replay = await send(growth.apiKey, 'Release 42 is out');
  assert.deepEqual([replay.status, replay.body.campaignId, replay.body.duplicate], [200, first.body.campaignId, true]);
  const conflict = await send(growth.apiKey, 'Changed');
  assert.equal(conflict.status, 409);
  const db = await connectDatabase();
  try {
    const { rows } = await db.query<{ notification_id: string }>('SELECT notification_id FROM campaign.send_requests WHERE workspace_id = $1 ORDER BY created_at', [growth.workspaceId]);
    assert.deepEqual(
      rows.map((row) => row.notification_id),
      [first.body.campaignId, second.body.campaignId],
    );
  } finally {
    await db.end();
  }
});
