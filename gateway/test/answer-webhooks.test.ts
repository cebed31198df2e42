import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import {
  call,
  connectDatabase,
  createDatabase,
  createKey,
  createWorkspace,
  eventually,
  freePort,
  SERVER_API,
  startReceiver,
  startStack,
  type Receiver,
  type Stack,
  type TestDatabase,
} from '@herald/testkit';
import { Webhook } from 'standardwebhooks';

// callbackUrl webhooks of /ask and /decisions: enqueued with the answer, withdrawal, cancellation
// or expiry, signed with the workspace's secret and posted to a strict local HTTPS receiver. The
// decision service here has a database of its own, so no other test file's dispatcher (which
// refuses loopback addresses) meets these webhooks.

let stack: Stack;
let receiver: Receiver;
let database: TestDatabase;
let gateway: string;
before(async () => {
  stack = await startStack({ decisions: true });
  receiver = await startReceiver();
  database = await createDatabase();
  const caFile = join(await mkdtemp(join(tmpdir(), 'herald-receiver-')), 'ca.pem');
  await writeFile(caFile, receiver.ca);
  const port = await freePort();
  await stack.startService('decision', {
    GRPC_PORT: String(port),
    DATABASE_URL: database.url,
    WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true',
    WEBHOOK_CA_FILE: caFile,
    EXPIRY_SWEEP_MS: '100',
  });
  gateway = await stack.addGateway({ DECISION_GRPC_URL: `127.0.0.1:${port}` });
});
after(async () => {
  await stack.stop();
  await receiver.close();
  await database.drop();
});

interface Delivered {
  type: string;
  data: Record<string, unknown>;
}

/** The webhook posted to `path`, its signature checked with the workspace's secret. */
async function delivered(path: string, secret: string): Promise<Delivered> {
  const webhook = await eventually(
    `a webhook at ${path}`,
    async () => receiver.received.find((received) => received.path === path),
    (found) => found !== undefined,
    10_000,
  );
  if (!webhook) throw new Error('unreachable');
  const verified = new Webhook(secret).verify(webhook.body, webhook.headers) as Delivered & { timestamp: string };
  assert.deepEqual(Object.keys(verified), ['type', 'timestamp', 'data']);
  return { type: verified.type, data: verified.data };
}

async function workspaceWithSecret(): Promise<{ apiKey: string; keyId: string; secret: string }> {
  const workspace = await createWorkspace();
  const { apiKey, keyId } = await createKey(workspace.workspaceId, 'dashboard');
  const response = await call<{ secret: string }>(stack.gatewayUrl, `${SERVER_API}/webhooks/secret`, { key: apiKey });
  assert.equal(response.status, 200);
  return { apiKey, keyId, secret: response.body.secret };
}

test('an answer and a withdrawal of an ask are posted to its callbackUrl', async () => {
  const { apiKey, secret } = await workspaceWithSecret();
  const ask = (path: string) =>
    call<{ correlationId: string; liveUrl: string }>(gateway, `${SERVER_API}/ask`, {
      method: 'POST',
      key: apiKey,
      body: { question: 'Ship it?', wait: false, callbackUrl: `${receiver.origin}${path}` },
    });
  const answered = await ask('/ask-answered');
  assert.equal(answered.status, 200);
  const token = answered.body.liveUrl.slice(answered.body.liveUrl.indexOf('/a/') + 3);
  const byLink = await call<{ answeredBy: { at: string } }>(gateway, `/api/v1/answer/${token}`, { method: 'POST', body: { answer: 'yes' } });
  assert.equal(byLink.status, 200);
  // The caller's link names nobody: its holder answered.
  const answeredBy = { kind: 'link', id: '', displayName: 'the holder of the answer link', channel: 'answer_page', at: byLink.body.answeredBy.at };
  assert.deepEqual(await delivered('/ask-answered', secret), {
    type: 'ask.answered',
    data: { correlationId: answered.body.correlationId, question: 'Ship it?', type: 'confirm', status: 'answered', answered: true, value: 'yes', answeredBy },
  });

  const withdrawn = await ask('/ask-withdrawn');
  assert.equal((await call(gateway, `${SERVER_API}/ask/${withdrawn.body.correlationId}`, { method: 'DELETE', key: apiKey })).status, 200);
  assert.deepEqual(await delivered('/ask-withdrawn', secret), {
    type: 'ask.withdrawn',
    data: { correlationId: withdrawn.body.correlationId, question: 'Ship it?', type: 'confirm', status: 'withdrawn', answered: false, answeredBy: null },
  });
  assert.deepEqual(receiver.violations, []);
});

test('a decision’s answer, cancellation and expiry are posted once each; an expiry is never an approval', async () => {
  const { apiKey, keyId, secret } = await workspaceWithSecret();
  const open = async (path: string, extra: Record<string, unknown> = {}) => {
    const response = await call<{ decisionId: string }>(gateway, `${SERVER_API}/decisions`, {
      method: 'POST',
      key: apiKey,
      body: { question: 'Pay 40 EUR?', toolName: 'pay', callbackUrl: `${receiver.origin}${path}`, ...extra },
    });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    return response.body.decisionId;
  };
  const common = { question: 'Pay 40 EUR?', type: 'confirm', externalId: 'owner', toolName: 'pay' };

  const answered = await open('/decision-answered', { idempotencyKey: 'pay-1' });
  const byKey = await call<{ answeredAt: string }>(
    gateway,
    `${SERVER_API}/decisions/${answered}`,
    { method: 'POST', key: apiKey, body: { answer: true } },
  );
  assert.equal(byKey.status, 200);
  // Answered with the key: the key answered, through the API.
  const answeredBy = { kind: 'key', id: keyId, displayName: keyId, channel: 'api', at: byKey.body.answeredAt };
  assert.deepEqual(await delivered('/decision-answered', secret), {
    type: 'decision.answered',
    data: { decisionId: answered, ...common, status: 'answered', approved: true, answer: 'yes', idempotencyKey: 'pay-1', answeredBy },
  });

  const cancelled = await open('/decision-cancelled');
  assert.equal((await call(gateway, `${SERVER_API}/decisions/${cancelled}`, { method: 'DELETE', key: apiKey })).status, 200);
  assert.deepEqual(await delivered('/decision-cancelled', secret), {
    type: 'decision.cancelled',
    data: { decisionId: cancelled, ...common, status: 'cancelled', approved: false, answer: null, idempotencyKey: null, answeredBy: null },
  });

  const expireNow = async (id: string): Promise<void> => {
    const db = await connectDatabase(database.url);
    try {
      await db.query(`UPDATE decision.questions SET expires_at = now() - interval '1 second' WHERE id = $1`, [id]);
    } finally {
      await db.end();
    }
  };
  const expired = await open('/decision-expired', { expiresInSeconds: 60 });
  await expireNow(expired);
  assert.deepEqual(await delivered('/decision-expired', secret), {
    type: 'decision.expired',
    data: { decisionId: expired, ...common, status: 'expired', approved: false, answer: null, idempotencyKey: null, answeredBy: null },
  });
  // Reported once, however often the sweep runs: a later expiry reported proves it ran again since.
  const later = await open('/decision-expired-later', { expiresInSeconds: 60 });
  await expireNow(later);
  await delivered('/decision-expired-later', secret);
  assert.equal(receiver.received.filter((received) => received.path === '/decision-expired').length, 1);
  assert.deepEqual(receiver.violations, []);
});

test('a callbackUrl that reaches a private address is refused where webhooks may not go there', async () => {
  const { apiKey } = await createWorkspace();
  for (const path of ['/ask', '/decisions']) {
    const response = await call<{ fields: unknown }>(stack.gatewayUrl, `${SERVER_API}${path}`, {
      method: 'POST',
      key: apiKey,
      body: { question: 'Sure?', wait: false, callbackUrl: 'https://127.0.0.1:8443/hook' },
    });
    assert.equal(response.status, 400);
    assert.deepEqual(response.body.fields, [
      {
        field: 'callbackUrl',
        in: 'body',
        problem: 'must resolve to public addresses only (not private, loopback, link-local, CGNAT, multicast or unspecified)',
      },
    ]);
  }
});
