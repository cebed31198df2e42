import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, connectDatabase, createWorkspace, SERVER_API, startStack, type TestWorkspace } from '@herald/testkit';
import type pg from 'pg';

// Graceful SIGTERM: a process stops accepting, finishes what is in flight, then exits 0.
// A request is held in flight by a row lock on the machine it reports.

let db: pg.Client;
let workspace: TestWorkspace;

before(async () => {
  db = await connectDatabase();
  workspace = await createWorkspace('growth');
});
after(() => db.end());

const report = (url: string, name: string) =>
  call(url, `${SERVER_API}/machines`, { method: 'POST', key: workspace.apiKey, body: { machineId: 'held', name } });

/**
 * Locks the reported machine's row and returns once a request is queued behind the lock (wrapped,
 * since an async function returning the promise itself would wait for it).
 */
async function holdNextReport(url: string, name: string): Promise<{ inFlight: ReturnType<typeof report> }> {
  await db.query('BEGIN');
  const { rowCount } = await db.query(`SELECT 1 FROM account.machines WHERE workspace_id = $1 AND machine_id = 'held' FOR UPDATE`, [
    workspace.workspaceId,
  ]);
  assert.equal(rowCount, 1);
  const inFlight = report(url, name);
  for (let attempt = 0; ; attempt += 1) {
    // Inside a transaction the activity view is a snapshot; refresh it on each look.
    await db.query('SELECT pg_stat_clear_snapshot()');
    const { rows } = await db.query<{ waiting: string }>(
      `SELECT count(*) AS waiting FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO machines%'`,
    );
    if (Number(rows[0]?.waiting) > 0) return { inFlight };
    if (attempt > 200) throw new Error('the request never reached the lock');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

test('GET /healthz and GET /readyz answer 200 while the gateway runs; once it drains, a probe cannot connect', async () => {
  const stack = await startStack();
  try {
    for (const [path, status] of [
      ['/healthz', 'ok'],
      ['/readyz', 'ready'],
    ] as const) {
      const response = await call(stack.gatewayUrl, path);
      assert.deepEqual([response.status, response.body], [200, { status }], path);
    }
    assert.equal((await report(stack.gatewayUrl, 'first')).status, 200);
    const { inFlight } = await holdNextReport(stack.gatewayUrl, 'probed');
    const gateway = stack.gateways[0];
    assert.ok(gateway);
    gateway.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 300));
    // A kubelet probe opens a new connection each time: refused, so the pod is no longer ready.
    await assert.rejects(fetch(`${stack.gatewayUrl}/readyz`), 'the readiness probe fails while draining');
    await db.query('COMMIT');
    assert.equal((await inFlight).status, 200);
    assert.equal(await gateway.exited, 0);
  } finally {
    await stack.stop();
  }
});

test('the gateway completes an in-flight request after SIGTERM and refuses new connections', async () => {
  const stack = await startStack();
  try {
    assert.equal((await report(stack.gatewayUrl, 'first')).status, 200);
    const { inFlight } = await holdNextReport(stack.gatewayUrl, 'kept');
    const gateway = stack.gateways[0];
    assert.ok(gateway);
    gateway.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 300));
    await assert.rejects(fetch(`${stack.gatewayUrl}${SERVER_API}/identity`), 'a new connection is refused while draining');
    await db.query('COMMIT');
    const response = await inFlight;
    assert.equal(response.status, 200);
    assert.equal((response.body.machine as { name: string }).name, 'kept');
    assert.equal(await gateway.exited, 0);
  } finally {
    await stack.stop();
  }
});

test('the account service finishes an in-flight call after SIGTERM; the gateway then answers 503 without internals', async () => {
  const stack = await startStack();
  try {
    const { inFlight } = await holdNextReport(stack.gatewayUrl, 'in flight');
    const account = stack.services[0];
    assert.ok(account);
    account.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(account.child.exitCode, null, 'still draining while the call is in flight');
    await db.query('COMMIT');
    const response = await inFlight;
    assert.equal(response.status, 200);
    assert.equal((response.body.machine as { name: string }).name, 'in flight');
    assert.equal(await account.exited, 0);

    const unavailable = await call(stack.gatewayUrl, `${SERVER_API}/machines`, { key: workspace.apiKey });
    assert.equal(unavailable.status, 503);
    assert.deepEqual(unavailable.body, {
      error: 'A backing service is unavailable.',
      code: 'unavailable',
      status: 503,
      message: 'A backing service is unavailable.',
      hint: 'Retry later; the service is temporarily unavailable.',
      documentation: 'http://localhost:8080/docs/errors#unavailable',
    });
  } finally {
    await stack.stop();
  }
});
