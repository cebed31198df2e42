import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { call, createWorkspace, requiredEnv, SERVER_API, startStack, type Stack, type TestWorkspace } from '@herald/testkit';
import pg from 'pg';

// The gateway on SIGTERM: refuses new connections, completes the request in flight, exits 0.

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

test('an in-flight request completes after SIGTERM and new connections are refused', async () => {
  const report = () =>
    call(stack.gatewayUrl, `${SERVER_API}/machines`, { method: 'POST', key: workspace.apiKey, body: { machineId: 'held', name: 'kept' } });
  assert.equal((await report()).status, 200);
  await db.query('BEGIN');
  await db.query(`SELECT 1 FROM account.machines WHERE workspace_id = $1 AND machine_id = 'held' FOR UPDATE`, [workspace.workspaceId]);
  const inFlight = report();
  await new Promise((resolve) => setTimeout(resolve, 500));
  const gateway = stack.gateways[0];
  assert.ok(gateway);
  gateway.child.kill('SIGTERM');
  await new Promise((resolve) => setTimeout(resolve, 300));
  await assert.rejects(fetch(`${stack.gatewayUrl}${SERVER_API}/identity`), 'a new connection is refused while draining');
  await db.query('COMMIT');
  const response = await inFlight;
  assert.equal(response.status, 200);
  assert.equal(await gateway.exited, 0);
});
