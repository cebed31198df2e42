/**
 * Outbound webhooks end to end on real PostgreSQL (a schema of its own per test) and a strict local
 * HTTPS receiver; signatures are checked with the `standardwebhooks` package, independently of
 * Herald's signing code.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';

import { ConfigError, Env } from '@herald/config';
import { createPool, migrate, withTransaction, type Pool } from '@herald/db';
import { HeraldError } from '@herald/errors';
import { createLogger } from '@herald/logging';
import { requiredEnv, startDnsServer, startReceiver, type Receiver } from '@herald/testkit';
import { Webhook } from 'standardwebhooks';

import {
  assertWebhookUrl,
  dispatcherSettings,
  enqueueWebhook,
  startWebhookDispatcher,
  webhookMigrations,
  webhookSettings,
  type WebhookDispatcherOptions,
} from '../src/index.js';

const logger = createLogger('webhooks-test', process.env.TEST_LOG_LEVEL ?? 'silent');
const newSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;
const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(25);
  }
}

interface Setup {
  /** Runs `step` when the test ends, before the steps deferred earlier. */
  defer(step: () => Promise<unknown>): void;
  schema: string;
  pool: Pool;
  receiver: Receiver;
  /** Another pool on the schema, as another replica of the host service would have. */
  newPool(): Pool;
  dispatch(options?: Partial<WebhookDispatcherOptions>): { stop(): Promise<void> };
  send(data: unknown, url?: string): Promise<string>;
  attempts(id: string): Promise<Array<{ attempt: number; status_code: number | null; error: string | null }>>;
  status(id: string): Promise<string | undefined>;
}

/** A fresh schema with the webhook tables, a receiver, and cleanup of both on the test's end. */
async function setUp(t: TestContext, secrets: string[] = [newSecret()]): Promise<Setup> {
  const schema = `t_webhooks_${randomBytes(4).toString('hex')}`;
  const steps: Array<() => Promise<unknown>> = [];
  const defer = (step: () => Promise<unknown>): void => {
    steps.push(step);
  };
  t.after(async () => {
    for (let step = steps.pop(); step; step = steps.pop()) await step();
  });
  const newPool = (): Pool => {
    const pool = createPool({ url: requiredEnv('DATABASE_URL'), schema, max: 4, applicationName: 'webhooks-test' });
    defer(() => pool.end());
    return pool;
  };
  const pool = newPool();
  await migrate(pool, schema, [webhookMigrations]);
  defer(() => pool.query(`DROP SCHEMA ${schema} CASCADE`));
  const receiver = await startReceiver();
  defer(() => receiver.close());
  const workspaceId = `ws_${randomBytes(4).toString('hex')}`;
  return {
    defer,
    schema,
    pool,
    receiver,
    newPool,
    dispatch(options = {}) {
      const dispatcher = startWebhookDispatcher({
        pool: options.pool ?? pool,
        schema,
        logger,
        secrets: async (id) => {
          assert.equal(id, workspaceId);
          return secrets;
        },
        allowPrivateAddresses: true,
        ca: receiver.ca,
        pollMs: 100,
        retryBaseMs: 50,
        retryCapMs: 200,
        timeoutMs: 2_000,
        ...options,
      });
      defer(() => dispatcher.stop());
      return dispatcher;
    },
    send: (data, url = `${receiver.origin}/hooks/herald?x=1`) =>
      withTransaction(pool, (tx) => enqueueWebhook(tx, schema, { workspaceId, url, type: 'decision.resolved', data })),
    async attempts(id) {
      const { rows } = await pool.query(
        `SELECT attempt, status_code, error FROM ${schema}.webhook_attempts WHERE message_id = $1 ORDER BY attempt`,
        [id],
      );
      return rows;
    },
    async status(id) {
      const { rows } = await pool.query<{ status: string }>(`SELECT status FROM ${schema}.webhook_messages WHERE id = $1`, [id]);
      return rows[0]?.status;
    },
  };
}

test('a committed webhook is posted once, signed per Standard Webhooks with every secret; a rolled-back one never', async (t) => {
  const [newest, previous] = [newSecret(), newSecret()];
  const { receiver, dispatch, send, attempts, status, pool, schema } = await setUp(t, [newest, previous]);
  dispatch();

  await assert.rejects(
    withTransaction(pool, async (tx) => {
      await enqueueWebhook(tx, schema, { workspaceId: 'ws_x', url: `${receiver.origin}/rolled-back`, type: 'never', data: {} });
      throw new Error('deliberate rollback');
    }),
    /deliberate rollback/,
  );
  const id = await send({ decisionId: 'dec_1', answer: 'yes', nested: { n: 1, text: 'ü €' } });
  assert.match(id, /^msg_[a-z2-7]{24}$/);
  await waitFor('the delivery recorded', async () => (await status(id)) === 'delivered');

  assert.deepEqual(receiver.violations, []);
  assert.equal(receiver.received.length, 1, 'the rolled-back webhook was never sent');
  const [webhook] = receiver.received;
  assert.ok(webhook);
  assert.equal(webhook.path, '/hooks/herald?x=1');
  assert.equal(webhook.headers['webhook-id'], id);
  assert.equal(webhook.headers['webhook-signature']?.split(' ').length, 2, 'one signature per secret');
  // Each secret alone verifies the message: a receiver holding either (during a rotation) accepts it.
  for (const secret of [newest, previous]) {
    const payload = new Webhook(secret).verify(webhook.body, webhook.headers);
    assert.deepEqual(payload, {
      type: 'decision.resolved',
      timestamp: (payload as { timestamp: string }).timestamp,
      data: { decisionId: 'dec_1', answer: 'yes', nested: { n: 1, text: 'ü €' } },
    });
    assert.ok(Math.abs(Date.parse((payload as { timestamp: string }).timestamp) - Date.now()) < 10_000);
  }
  assert.throws(() => new Webhook(newSecret()).verify(webhook.body, webhook.headers), /No matching signature found/);
  assert.throws(() => new Webhook(newest).verify(webhook.body.replace('yes', 'no!'), webhook.headers), /No matching signature found/);
  assert.deepEqual(await attempts(id), [{ attempt: 1, status_code: 204, error: null }]);
});

test('a receiver that fails (500, then 429 with Retry-After) is retried with the same id until it accepts; every attempt recorded', async (t) => {
  const { receiver, dispatch, send, attempts, status, pool, schema } = await setUp(t);
  receiver.script.push({ status: 500 }, { status: 429, headers: { 'retry-after': '2' } }, { status: 200 });
  // Retry-After is honoured up to the cap.
  dispatch({ retryCapMs: 5_000 });
  const id = await send({ n: 1 });
  await waitFor('the delivery recorded', async () => (await status(id)) === 'delivered');

  assert.deepEqual(receiver.violations, []);
  assert.deepEqual(
    receiver.received.map((webhook) => webhook.headers['webhook-id']),
    [id, id, id],
  );
  const [, second, third] = receiver.received;
  assert.ok(second && third);
  assert.ok(third.at - second.at >= 1_900, `Retry-After honoured: ${third.at - second.at} ms`);
  // Each attempt is signed at its own time (receivers refuse stale timestamps), over the same body.
  assert.ok(Number(third.headers['webhook-timestamp']) > Number(second.headers['webhook-timestamp']));
  assert.equal(third.body, second.body);
  assert.deepEqual(await attempts(id), [
    { attempt: 1, status_code: 500, error: 'HTTP 500' },
    { attempt: 2, status_code: 429, error: 'HTTP 429' },
    { attempt: 3, status_code: 200, error: null },
  ]);
  const { rows } = await pool.query(`SELECT attempted_at, duration_ms FROM ${schema}.webhook_attempts WHERE message_id = $1 ORDER BY attempt`, [id]);
  assert.ok(rows.every((row) => row.attempted_at instanceof Date && Number.isInteger(row.duration_ms) && row.duration_ms >= 0));
});

test('gives up after the bounded schedule: network errors and redirects count as failures', async (t) => {
  const { receiver, dispatch, send, attempts, status } = await setUp(t);
  receiver.fallback = { status: 503 };
  receiver.script.push({ status: 302, headers: { location: `${receiver.origin}/elsewhere` } });
  dispatch({ maxAttempts: 3 });
  const id = await send({ n: 1 });
  // A closed port: the connection is refused.
  const unreachable = await send({ n: 2 }, 'https://127.0.0.1:1/hooks');
  await waitFor('both messages failed', async () => (await status(id)) === 'failed' && (await status(unreachable)) === 'failed');
  await delay(500);

  assert.deepEqual(receiver.violations, []);
  assert.equal(receiver.received.length, 3, 'no attempt after the last');
  assert.ok(receiver.received.every((webhook) => webhook.path === '/hooks/herald?x=1'), 'the redirect was not followed');
  assert.deepEqual(await attempts(id), [
    { attempt: 1, status_code: 302, error: 'HTTP 302' },
    { attempt: 2, status_code: 503, error: 'HTTP 503' },
    { attempt: 3, status_code: 503, error: 'HTTP 503' },
  ]);
  assert.deepEqual(
    await attempts(unreachable),
    [1, 2, 3].map((attempt) => ({ attempt, status_code: null, error: 'ECONNREFUSED' })),
  );
});

test('a redirect to a private address is never followed: 301, 302, 307, 308 are failed attempts', async (t) => {
  const { receiver, dispatch, send, attempts, status, defer } = await setUp(t);
  // The redirect's target: a second receiver on loopback, reachable if a redirect were followed (private addresses are allowed here).
  const internal = await startReceiver();
  defer(() => internal.close());
  for (const code of [301, 302, 307, 308]) receiver.script.push({ status: code, headers: { location: `${internal.origin}/internal` } });
  dispatch({ maxAttempts: 4 });
  const id = await send({ n: 1 });
  await waitFor('the message failed', async () => (await status(id)) === 'failed');
  assert.deepEqual(
    (await attempts(id)).map((attempt) => [attempt.status_code, attempt.error]),
    [301, 302, 307, 308].map((code) => [code, `HTTP ${code}`]),
  );
  assert.deepEqual([receiver.received.length, internal.received.length, receiver.violations], [4, 0, []]);
});

test('WEBHOOK_DNS_SERVERS: host names resolved by those servers alone (A and AAAA), again at every attempt, and connected to at the address they gave', async (t) => {
  const { receiver, dispatch, send, attempts, status } = await setUp(t);
  const dns = await startDnsServer({ 'receiver.hooks.test': ['127.0.0.1'] });
  t.after(() => dns.close());
  dispatch({ dnsServers: [dns.address], maxAttempts: 2 });
  const id = await send({ n: 1 }, `https://receiver.hooks.test:${receiver.port}/hooks`);
  await waitFor('the message failed', async () => (await status(id)) === 'failed');
  // The receiver at the address given answered the TLS handshake, with a certificate for 127.0.0.1
  // and localhost: checked against the URL's name, it is refused (no request is sent).
  assert.deepEqual(
    (await attempts(id)).map((attempt) => [attempt.status_code, attempt.error]),
    [1, 2].map(() => [null, 'ERR_TLS_CERT_ALTNAME_INVALID']),
  );
  assert.deepEqual([receiver.received.length, dns.violations], [0, []]);
  assert.deepEqual(dns.asked.sort(), ['receiver.hooks.test A', 'receiver.hooks.test A', 'receiver.hooks.test AAAA', 'receiver.hooks.test AAAA']);
  // A name the servers do not know does not resolve, whatever the system's resolver would say; localhost is loopback without asking (RFC 6761).
  await assert.rejects(assertWebhookUrl('https://unknown.hooks.test/hook', 'callbackUrl', { allowPrivateAddresses: true, dnsServers: [dns.address] }), /does not resolve/);
  await assert.rejects(assertWebhookUrl('https://app.localhost/hook', 'callbackUrl', { allowPrivateAddresses: false, dnsServers: [dns.address] }), /must resolve to public addresses only/);
  assert.deepEqual(dns.asked.slice(4).sort(), ['unknown.hooks.test A', 'unknown.hooks.test AAAA']);
});

test('an attempt that outlasts the timeout is abandoned and retried', async (t) => {
  const { receiver, dispatch, send, attempts, status } = await setUp(t);
  receiver.script.push({ status: 200, delayMs: 1_500 });
  dispatch({ timeoutMs: 300 });
  const id = await send({ n: 1 });
  await waitFor('the delivery recorded', async () => (await status(id)) === 'delivered');
  assert.deepEqual(await attempts(id), [
    { attempt: 1, status_code: null, error: 'timed out after 300 ms' },
    { attempt: 2, status_code: 204, error: null },
  ]);
});

test('the URL is checked again at send time, and the request names the URL host, not the address', async (t) => {
  const { receiver, dispatch, send, attempts, status, defer } = await setUp(t);
  const strict = dispatch({ allowPrivateAddresses: false, maxAttempts: 2 });
  const id = await send({ n: 1 }, `https://localhost:${receiver.port}/hooks`);
  await waitFor('the message failed', async () => (await status(id)) === 'failed');
  assert.equal(receiver.received.length, 0);
  const refused = await attempts(id);
  assert.deepEqual(refused.map((row) => [row.attempt, row.status_code]), [[1, null], [2, null]]);
  assert.deepEqual(refused.map((row) => row.error), ['refused: the address resolves to a loopback network (127.0.0.1)', 'refused: the address resolves to a loopback network (127.0.0.1)']);
  const privateId = await send({ n: 3 }, 'https://10.1.2.3/hooks');
  await waitFor('the private address refused', async () => (await status(privateId)) === 'failed');
  assert.deepEqual((await attempts(privateId)).map((row) => row.error), ['refused: the address resolves to a private network (10.1.2.3)', 'refused: the address resolves to a private network (10.1.2.3)']);

  await strict.stop();
  const named = await startReceiver(new RegExp(`^localhost:\\d+$`));
  defer(() => named.close());
  dispatch({ maxAttempts: 1 });
  const viaName = await send({ n: 2 }, `https://localhost:${named.port}/hooks`);
  await waitFor('delivered by name', async () => (await status(viaName)) === 'delivered');
  assert.deepEqual(named.violations, []);
  assert.equal(named.received[0]?.headers.host, `localhost:${named.port}`);
});

test('two dispatchers on one schema never send one message twice', async (t) => {
  const { receiver, dispatch, send, newPool, pool, schema } = await setUp(t);
  receiver.fallback = { status: 200, delayMs: 20 };
  const ids = await Promise.all(Array.from({ length: 60 }, (_, n) => send({ n })));
  dispatch({ concurrency: 4 });
  dispatch({ concurrency: 4, pool: newPool() });
  const delivered = async (): Promise<number> => {
    const { rows } = await pool.query<{ count: number }>(`SELECT count(*)::int AS count FROM ${schema}.webhook_messages WHERE status = 'delivered'`);
    return rows[0]?.count ?? 0;
  };
  await waitFor('every message delivered', async () => (await delivered()) === ids.length, 30_000);
  await delay(300);
  assert.deepEqual(receiver.violations, []);
  assert.deepEqual(receiver.received.map((webhook) => webhook.headers['webhook-id']).sort(), [...ids].sort());
  const { rows } = await pool.query<{ attempts: number }>(`SELECT count(*)::int AS attempts FROM ${schema}.webhook_attempts WHERE attempt = 1`);
  assert.equal(rows[0]?.attempts, ids.length);
});

test('assertWebhookUrl refuses what must never be called, naming the field', async () => {
  const refusals: Array<[string, string]> = [
    ['http://example.com/hook', 'must use https'],
    ['https://user:pass@example.com/hook', 'must not contain credentials'],
    [`https://example.com/${'a'.repeat(2_030)}`, 'must be at most 2048 characters'],
    ['not a url', 'must be an absolute https URL'],
    ['https://10.1.2.3/hook', 'private'],
    ['https://127.0.0.1/hook', 'private'],
    ['https://[::1]/hook', 'private'],
    ['https://169.254.169.254/latest/meta-data', 'private'],
    ['https://[fc00::1]/hook', 'private'],
    ['https://[fd12:3456::1]/hook', 'private'],
    ['https://[fe80::1]/hook', 'private'],
    ['https://100.64.0.1/hook', 'private'],
    ['https://172.16.0.1/hook', 'private'],
    ['https://192.168.1.1/hook', 'private'],
    ['https://224.0.0.1/hook', 'private'],
    ['https://0.0.0.0/hook', 'private'],
    ['https://[::]/hook', 'private'],
    ['https://[::ffff:127.0.0.1]/hook', 'private'],
    ['https://[::ffff:10.0.0.1]/hook', 'private'],
    ['https://localhost/hook', 'private'],
    ['https://does-not-exist.invalid/hook', 'does not resolve'],
  ];
  for (const [url, problem] of refusals) {
    await assert.rejects(
      assertWebhookUrl(url, 'callbackUrl', { allowPrivateAddresses: false }),
      (err: unknown) => {
        assert.ok(err instanceof HeraldError, url);
        assert.equal(err.code, 'invalid_request', url);
        const fields = err.extra.fields as Array<{ field: string; in: string; problem: string }>;
        assert.equal(fields.length, 1, url);
        assert.equal(fields[0]?.field, 'callbackUrl', url);
        assert.equal(fields[0]?.in, 'body', url);
        assert.ok(fields[0]?.problem.includes(problem), `${url}: ${fields[0]?.problem}`);
        return true;
      },
      url,
    );
  }
  // Public addresses pass; with allowPrivateAddresses so do loopback ones, but never http or credentials.
  await assertWebhookUrl('https://93.184.215.14/hook', 'callbackUrl', { allowPrivateAddresses: false });
  await assertWebhookUrl('https://[2606:4700::1111]/hook', 'callbackUrl', { allowPrivateAddresses: false });
  await assertWebhookUrl('https://[::ffff:8.8.8.8]/hook', 'callbackUrl', { allowPrivateAddresses: false });
  await assertWebhookUrl('https://127.0.0.1:8443/hook', 'callbackUrl', { allowPrivateAddresses: true });
  await assertWebhookUrl('https://localhost/hook', 'callbackUrl', { allowPrivateAddresses: true });
  await assert.rejects(assertWebhookUrl('http://127.0.0.1/hook', 'callbackUrl', { allowPrivateAddresses: true }), /must use https/);
  await assert.rejects(assertWebhookUrl('https://a:b@127.0.0.1/hook', 'callbackUrl', { allowPrivateAddresses: true }), /must not contain credentials/);
});

test('the WEBHOOK_* settings: defaults, overrides, bad values named, the CA file read', async (t) => {
  const defaults = new Env({});
  assert.deepEqual(dispatcherSettings(webhookSettings(defaults).webhooks), {
    allowPrivateAddresses: false,
    dnsServers: [],
    timeoutMs: 10_000,
    maxAttempts: 8,
    retryBaseMs: 600_000,
    retryCapMs: 28_800_000,
  });
  defaults.done();

  const dir = await mkdtemp(join(tmpdir(), 'webhooks-ca-'));
  t.after(() => rm(dir, { recursive: true }));
  const caFile = join(dir, 'ca.pem');
  await writeFile(caFile, 'PEM');
  const env = new Env({
    WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'true',
    WEBHOOK_CA_FILE: caFile,
    WEBHOOK_TIMEOUT_MS: '2000',
    WEBHOOK_MAX_ATTEMPTS: '3',
    WEBHOOK_RETRY_BASE_MS: '100',
    WEBHOOK_RETRY_CAP_MS: '1000',
  });
  assert.deepEqual(dispatcherSettings(webhookSettings(env).webhooks), {
    allowPrivateAddresses: true,
    dnsServers: [],
    ca: 'PEM',
    timeoutMs: 2_000,
    maxAttempts: 3,
    retryBaseMs: 100,
    retryCapMs: 1_000,
  });

  assert.deepEqual(webhookSettings(new Env({ WEBHOOK_DNS_SERVERS: '10.0.0.53, [fd00::53]:5353,127.0.0.1:53' })).webhooks.dnsServers, ['10.0.0.53', '[fd00::53]:5353', '127.0.0.1:53']);

  const bad = new Env({ WEBHOOK_MAX_ATTEMPTS: '0', WEBHOOK_ALLOW_PRIVATE_ADDRESSES: 'yes', WEBHOOK_DNS_SERVERS: 'dns.example' });
  webhookSettings(bad);
  assert.throws(
    () => bad.done(),
    (err: unknown) => err instanceof ConfigError && err.problems.length === 3 && err.problems.every((problem) => problem.startsWith('WEBHOOK_')),
  );
});
