import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { killAllNow, launch, stopAll, type LaunchedProcess, type LaunchEvent, type LaunchOptions } from '../src/index.js';

// The one launcher of npm start, the test stacks and the benchmarks, on a small child script.

const entry = fileURLToPath(new URL('./fixtures/child.js', import.meta.url));
const child = (mode: string, options: Partial<LaunchOptions> = {}): Promise<LaunchedProcess> =>
  launch({ name: `child-${mode}`, entry, nodeArgs: [], ...options, env: { CHILD_MODE: mode, ...options.env } });

function alive(pid: number | undefined): boolean {
  try {
    process.kill(pid as number, 0);
    return true;
  } catch {
    return false;
  }
}

/** A port nothing listens on (the kernel's pick, released). */
function unusedPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

test('ready by a line of its output, or by its port accepting connections; named as a Herald process; stopped with SIGTERM', async () => {
  const port = await unusedPort();
  const byLine = await child('serve', { ready: /serving/, env: { PORT: String(port) } });
  assert.equal(byLine.output(), 'serving\n');
  assert.equal(await byLine.stop(), 0);
  assert.equal(alive(byLine.pid), false);

  const byPort = await child('serve', { ready: { port }, env: { PORT: String(port) } });
  assert.ok(alive(byPort.pid));
  assert.equal(await byPort.stop(), 0);

  const named = await child('crash', { name: 'audience' });
  assert.equal(await named.exited, 3);
  assert.equal(named.output(), 'up as audience\n');
});

test('a process that exits before it is ready, or is not ready in time, fails the launch and is not left running', async () => {
  await assert.rejects(child('crash', { ready: /never/ }), (err: Error) => {
    assert.equal(err.message, 'child-crash exited (3) before it was ready:\nup as child-crash\n');
    return true;
  });
  let started: number | undefined;
  await assert.rejects(
    child('silent', { ready: /never/, timeoutMs: 300, onEvent: (event) => event.kind === 'started' && (started = event.pid) }),
    /^Error: child-silent did not become ready within 300 ms/,
  );
  assert.equal(alive(started), false);
  await assert.rejects(child('silent', { ready: { port: await unusedPort() }, timeoutMs: 300 }), /^Error: child-silent did not listen on \d+ within 300 ms/);
  await assert.rejects(launch({ name: 'x', entry, ready: /x/, stdio: 'inherit' }), /x: readiness by output needs stdio 'pipe'/);
});

test('a stop that outlasts its grace period ends in SIGKILL', async () => {
  const stubborn = await child('stubborn', { ready: /ready/, stopGraceMs: 200 });
  assert.equal(await stubborn.stop(), 'SIGKILL');
  assert.match(stubborn.output(), /not stopping/);
});

/**
 * A crashing child with a restart policy whose delays are the lowest equal jitter allows (half of
 * 50, 100, 200 ms), stopped while it waits for its third restart; what it went through.
 */
async function crashThrice(healthyAfterMs: number): Promise<{ stopped: number | string; exited: number | string; delays: number[]; pids: (number | undefined)[] }> {
  const events: LaunchEvent[] = [];
  let exits!: () => void;
  const threeExits = new Promise<void>((resolve) => (exits = resolve));
  const running = await child('crash', {
    restart: { backoff: { baseMs: 50, capMs: 200, jitter: 'equal', random: () => 0 }, healthyAfterMs },
    onEvent(event) {
      events.push(event);
      if (events.filter((seen) => seen.kind === 'exited').length === 3) exits();
    },
  });
  await threeExits;
  const stopped = await running.stop();
  return {
    stopped,
    exited: await running.exited,
    delays: events.flatMap((event) => (event.kind === 'exited' && event.restartInMs !== undefined ? [event.restartInMs] : [])),
    pids: events.flatMap((event) => (event.kind === 'started' ? [event.pid] : [])),
  };
}

test('with a restart policy, a process that exits is started again after the backoff, a new process each time; stop ends it for good', async () => {
  const timersBefore = process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
  const { stopped, exited, delays, pids } = await crashThrice(60_000);
  assert.equal(stopped, 3);
  assert.equal(exited, 3);
  assert.deepEqual(delays, [25, 50, 100]);
  assert.equal(new Set(pids).size, 3, 'each start is a new process');
  // No restart is left pending.
  assert.equal(process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length, timersBefore);
});

test('a process that was up long enough before it exited starts the backoff over', async () => {
  assert.deepEqual((await crashThrice(0)).delays, [25, 25, 25]);
});

test('stopAll stops every process launched here (SIGKILL after the grace period); killAllNow kills them at once', async () => {
  const [first, second] = await Promise.all([child('stubborn', { ready: /ready/ }), child('stubborn', { ready: /ready/ })]);
  await stopAll(200);
  assert.deepEqual(await Promise.all([first.exited, second.exited]), ['SIGKILL', 'SIGKILL']);

  const third = await child('stubborn', { ready: /ready/ });
  killAllNow();
  assert.equal(await third.exited, 'SIGKILL');
});

test('a process with inherited output and a restart policy (npm start) ends when the process that launched it is killed', async () => {
  const supervisor = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/supervisor.js', import.meta.url))], { stdio: ['ignore', 'pipe', 'inherit'] });
  let printed = '';
  const [, pid] = await new Promise<RegExpExecArray>((resolve) => {
    supervisor.stdout.on('data', (chunk: Buffer) => {
      printed += chunk.toString();
      const found = /child (\d+)\n/.exec(printed);
      if (found) resolve(found);
    });
  });
  assert.ok(alive(Number(pid)));
  supervisor.kill('SIGKILL');
  await once(supervisor, 'exit');
  const deadline = Date.now() + 10_000;
  while (alive(Number(pid)) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(alive(Number(pid)), false, `the child (pid ${pid}) outlived its supervisor`);
});
