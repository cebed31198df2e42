import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, createWorkspace, requiredEnv, SERVER_API, startStack, type Stack, type TestWorkspace } from '@herald/testkit';
import pg from 'pg';

// Graceful SIGTERM: the process stops accepting, finishes what is in flight, then exits 0.
// A request is held in flight by a row lock on the machine it reports.

let stack: Stack;
let workspace: TestWorkspace;
let db: pg.Client;

before(async () => {
  stack = await startStack();
  workspace = await createWorkspace('growth');
  db = new pg.Client({ connectionString: requiredEnv('DATABASE_URL') });
  await db.connect();
});
after(async () => {
  await db.end();
  await stack.stop();
});

const report = (url: string) =>
  call(url, `${SERVER_API}/machines`, { method: 'POST', key: workspace.apiKey, body: { machineId: 'held', name: 'in flight' } });

async function holdMachineRow(): Promise<void> {
  await db.query('BEGIN');
  const { rowCount } = await db.query(`SELECT 1 FROM account.machines WHERE workspace_id = $1 AND machine_id = 'held' FOR UPDATE`, [
    workspace.workspaceId,
  ]);
  assert.equal(rowCount, 1);
}

async function waitForLockWaiter(): Promise<void> {
  for (let attempt = 0; attempt < 50; attempt += 1) {
    const { rows } = await db.query<{ waiting: string }>(
      `SELECT count(*) AS waiting FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO machines%'`,
    );
    if (Number(rows[0]?.waiting) > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the request never reached the lock');
}

test('the account service finishes an in-flight call after SIGTERM; the gateway then answers 503 without internals', async () => {
  assert.equal((await report(stack.gatewayUrl)).status, 200);
  await holdMachineRow();
  const inFlight = report(stack.gatewayUrl);
  await waitForLockWaiter();
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
});
