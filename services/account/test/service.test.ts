import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';

import { credentials } from '@grpc/grpc-js';
import { topics } from '@herald/bus';
import { HeraldError } from '@herald/errors';
import { createClient } from '@herald/grpc';
import { HealthCheckResponse_ServingStatus, HealthClient } from '@herald/proto/grpc/health/v1/health';
import { AccountServiceClient } from '@herald/proto/herald/account/v1/account';
import { AccountEvent } from '@herald/proto/herald/account/v1/events';
import { admin, createKey, createWorkspace, freePort, infrastructureEnv, requiredEnv, startProcess, type RunningProcess } from '@herald/testkit';
import { Kafka, logLevel, type Consumer } from 'kafkajs';

// The account service over its public surfaces: the gRPC health protocol and its events on Kafka.

let service: RunningProcess;
let port: number;
let consumer: Consumer;
const received: AccountEvent[] = [];

before(async () => {
  port = await freePort();
  service = await startProcess('account', 'services/account/dist/src/main.js', { ...infrastructureEnv(), GRPC_PORT: String(port) }, /serving/);
  const kafka = new Kafka({ brokers: requiredEnv('KAFKA_BROKERS').split(','), logLevel: logLevel.NOTHING });
  consumer = kafka.consumer({ groupId: `test-account-${randomUUID()}` });
  await consumer.connect();
  await consumer.subscribe({ topic: topics.accountEvents.name, fromBeginning: false });
  let joined!: () => void;
  const ready = new Promise<void>((resolve) => (joined = resolve));
  consumer.on(consumer.events.GROUP_JOIN, () => joined());
  await consumer.run({
    eachMessage: async ({ message }) => {
      if (message.value) received.push(AccountEvent.decode(message.value));
    },
  });
  await ready;
});

after(async () => {
  await consumer.disconnect();
  await service.stop();
});

async function eventsFor(workspaceId: string, count: number): Promise<AccountEvent[]> {
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const events = received.filter((event) => event.workspaceId === workspaceId);
    if (events.length >= count) return events;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`expected ${count} events for ${workspaceId}, got ${received.filter((e) => e.workspaceId === workspaceId).length}`);
}

test('state changes reach Kafka through the outbox, in order, with event ids', async () => {
  const workspace = await createWorkspace('starter');
  const key = await admin<{ keyId: string }>('key', 'create', '--workspace', workspace.workspaceId, '--origin', 'connector');
  await admin('key', 'revoke', '--key', key.keyId);
  await admin('workspace', 'set-plan', '--workspace', workspace.workspaceId, '--plan', 'growth');
  const events = await eventsFor(workspace.workspaceId, 5);
  assert.deepEqual(
    events.map((event) => event.kind),
    [
      { $case: 'workspaceCreated', value: { name: events[0]?.kind?.$case === 'workspaceCreated' ? events[0].kind.value.name : '', plan: 'starter', siteId: workspace.siteId } },
      { $case: 'keyCreated', value: { keyId: workspace.keyId, origin: 'dashboard' } },
      { $case: 'keyCreated', value: { keyId: key.keyId, origin: 'connector' } },
      { $case: 'keyRevoked', value: { keyId: key.keyId } },
      { $case: 'planChanged', value: { previousPlan: 'starter', plan: 'growth' } },
    ],
  );
  assert.equal(new Set(events.map((event) => event.eventId)).size, 5);
});

test('removing a member publishes MemberRemoved; a refused removal publishes nothing', async () => {
  const account = createClient(AccountServiceClient, `127.0.0.1:${port}`, 5_000);
  try {
    const [workspace, other] = [await createWorkspace(), await createWorkspace()];
    const invite = (workspaceId: string, name: string, role: string) =>
      admin<{ memberId: string }>('member', 'invite', '--workspace', workspaceId, '--email', `${name}-${randomUUID()}@example.com`, '--role', role);
    const alice = await invite(workspace.workspaceId, 'alice', 'approver');
    const stranger = await invite(other.workspaceId, 'stranger', 'approver');

    const removed = await account.removeMember({ workspaceId: workspace.workspaceId, memberId: alice.memberId, actorRole: 'owner' });
    assert.equal(removed.member?.status, 'removed');
    // Another workspace's member, an unknown one and one the actor may not remove: no removal, no event.
    for (const memberId of [stranger.memberId, 'mem_nobody']) {
      await assert.rejects(account.removeMember({ workspaceId: workspace.workspaceId, memberId, actorRole: 'owner' }), { code: 'not_found' });
    }
    const owner = await invite(other.workspaceId, 'owner', 'owner');
    await assert.rejects(account.removeMember({ workspaceId: other.workspaceId, memberId: owner.memberId, actorRole: 'approver' }), { code: 'forbidden' });
    // A later event of the workspace: once it is here, every earlier one is too (one partition per workspace).
    await admin('workspace', 'set-plan', '--workspace', workspace.workspaceId, '--plan', 'growth');
    const events = await eventsFor(workspace.workspaceId, 4);
    assert.deepEqual(
      events.map((event) => event.kind?.$case),
      ['workspaceCreated', 'keyCreated', 'memberRemoved', 'planChanged'],
    );
    assert.deepEqual(events[2]?.kind, { $case: 'memberRemoved', value: { memberId: alice.memberId } });
    await admin('workspace', 'set-plan', '--workspace', other.workspaceId, '--plan', 'growth');
    assert.deepEqual(
      (await eventsFor(other.workspaceId, 3)).map((event) => event.kind?.$case),
      ['workspaceCreated', 'keyCreated', 'planChanged'],
    );
  } finally {
    account.close();
  }
});

test('the gRPC health protocol reports SERVING', async () => {
  const client = new HealthClient(`127.0.0.1:${port}`, credentials.createInsecure());
  const response = await new Promise((resolve, reject) =>
    client.check({ service: '' }, (err, reply) => (err ? reject(err) : resolve(reply))),
  );
  assert.deepEqual(response, { status: HealthCheckResponse_ServingStatus.SERVING });
  client.close();
});

test('AuthenticateKeyId returns the principal AuthenticateKey does, and refuses unknown, revoked and expired keys alike', async () => {
  const account = createClient(AccountServiceClient, `127.0.0.1:${port}`, 5_000);
  try {
    const { workspaceId } = await createWorkspace();
    const key = await createKey(workspaceId, 'runtime');
    const bySecret = await account.authenticateKey({ keyId: key.keyId, secret: key.apiKey.slice(key.apiKey.indexOf('.') + 1) });
    assert.deepEqual(await account.authenticateKeyId({ keyId: key.keyId }), bySecret);
    assert.deepEqual(bySecret.principal?.scopes, ['identity', 'account', 'notifications:send', 'ask', 'decisions']);

    const expiring = await createKey(workspaceId, 'runtime', '--expires-in', '1');
    await admin('key', 'revoke', '--key', key.keyId);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    for (const keyId of [key.keyId, expiring.keyId, 'a'.repeat(16)]) {
      await assert.rejects(account.authenticateKeyId({ keyId }), (err: unknown) => err instanceof HeraldError && err.code === 'unauthorized' && err.message === 'The API key is invalid, revoked or expired.');
    }
  } finally {
    account.close();
  }
});
