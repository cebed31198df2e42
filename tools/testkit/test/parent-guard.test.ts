import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';

import { isAlive as alive } from '../src/processes.js';
import { eventually } from '../src/sending.js';

test("a stack's processes end when the process that started them is killed with SIGKILL", async () => {
  const parent = spawn(process.execPath, [new URL('./fixtures/stack-then-wait.js', import.meta.url).pathname], { stdio: ['ignore', 'pipe', 'inherit'] });
  let printed = '';
  parent.stdout.on('data', (chunk: Buffer) => (printed += chunk.toString()));
  const pids = await eventually('the stack started', async () => printed, (text) => text.includes('\n'), 60_000).then((text) => JSON.parse(text) as number[]);
  assert.equal(pids.length, 3, 'account, audience and a gateway');
  assert.ok(pids.every(alive));

  parent.kill('SIGKILL');
  await once(parent, 'exit');
  await eventually('every process of the stack gone', async () => pids.filter(alive), (left) => left.length === 0, 15_000);
});
