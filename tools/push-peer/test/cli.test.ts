/**
 * The peer as its own process: spawn the CLI, read the ready line, send, read the control API.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { generateKeyPool, subscriptionFromPool, writeKeyPoolFile } from '../src/index.js';
import { encrypt, H2, makeVapidKeys, pathOf, reply, vapidAuthorization, type Outcome } from './sender.js';

const cli = fileURLToPath(new URL('../src/cli.js', import.meta.url));
const children: ChildProcessWithoutNullStreams[] = [];
const dirs: string[] = [];

after(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

interface Ready {
  origin: string;
  ca?: string;
  mode: string;
  pid: number;
  control: string;
}

async function startCli(args: string[]): Promise<{ child: ChildProcessWithoutNullStreams; ready: Ready }> {
  const child = spawn(process.execPath, [cli, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  children.push(child);
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const lines = createInterface({ input: child.stdout });
  const [line] = (await Promise.race([
    once(lines, 'line'),
    once(child, 'exit').then(([code]) => {
      throw new Error(`cli exited with ${String(code)} before ready: ${stderr}`);
    }),
  ])) as [string];
  return { child, ready: JSON.parse(line) as Ready };
}

function json(outcome: Outcome): Record<string, unknown> {
  return JSON.parse(reply(outcome).text) as Record<string, unknown>;
}

test('count mode over TLS with --key-pool-file: ready line, 201s, stats, reset, remote fault rules, clean SIGTERM', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'push-peer-cli-'));
  dirs.push(dir);
  const pool = generateKeyPool(10);
  const poolFile = join(dir, 'pool.json');
  await writeKeyPoolFile(poolFile, pool);
  const { child, ready } = await startCli(['--mode', 'count', '--tls', '--key-pool-file', poolFile, '--exit-with-stdin']);
  assert.match(ready.origin, /^https:\/\/127\.0\.0\.1:\d+$/);
  assert.match(ready.ca ?? '', /^-----BEGIN CERTIFICATE-----/);
  assert.equal(ready.mode, 'count');
  assert.equal(ready.pid, child.pid);
  assert.equal(ready.control, `${ready.origin}/__peer`);

  const client = new H2(ready.origin, ready.ca);
  try {
    const vapid = makeVapidKeys();
    const headers = { ttl: '60', 'content-encoding': 'aes128gcm', authorization: vapidAuthorization(vapid, ready.origin) };
    // The parent derives endpoints from the pool it wrote: /push/<index> uses pool[index % 10].
    const subs = [12, 12, 7, 123_456].map((i) => subscriptionFromPool(ready.origin, pool, i));
    for (const sub of subs) assert.equal((await client.request('POST', pathOf(sub.endpoint), headers, encrypt(Buffer.from('hi'), sub.keys))).status, 201);

    const stats = json(await client.request('GET', '/__peer/stats?perEndpoint=1'));
    assert.equal(stats['accepted'], 4);
    assert.equal(stats['requests'], 4);
    assert.equal(stats['endpoints'], 3);
    assert.deepEqual(stats['acceptedHistogram'], { '1': 2, '2': 1 });
    assert.deepEqual(stats['perEndpoint'], { [`${ready.origin}/push/12`]: 2, [`${ready.origin}/push/7`]: 1, [`${ready.origin}/push/123456`]: 1 });

    const fault = { endpoint: subs[0]!.endpoint, rule: { status: 429, retryAfter: 3, times: 1 } };
    assert.equal((await client.request('POST', '/__peer/respond-with', { 'content-type': 'application/json' }, JSON.stringify(fault))).status, 200);
    const limited = reply(await client.request('POST', pathOf(subs[0]!.endpoint), headers, encrypt(Buffer.from('hi'), subs[0]!.keys)));
    assert.equal(limited.status, 429);
    assert.equal(limited.headers['retry-after'], '3');
    const badRule = await client.request('POST', '/__peer/respond-with', {}, JSON.stringify({ rule: { status: 99 } }));
    assert.equal(badRule.status, 400);

    assert.equal((await client.request('POST', '/__peer/reset')).status, 200);
    const cleared = json(await client.request('GET', '/__peer/stats'));
    assert.equal(cleared['accepted'], 0);
    assert.equal(cleared['requests'], 0);
  } finally {
    await client.close();
  }
  child.kill('SIGTERM');
  const [code] = (await once(child, 'exit')) as [number | null];
  assert.equal(code, 0);
});

test('verify mode over h2c with --key-pool: the parent fetches the public pool, sends, and reads the decrypted message back', async () => {
  const { child, ready } = await startCli(['--h2c', '--key-pool', '3', '--subscriptions', '100', '--exit-with-stdin']);
  assert.match(ready.origin, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.equal(ready.ca, undefined);
  const client = new H2(ready.origin);
  try {
    const pool = json(await client.request('GET', '/__peer/key-pool'));
    const keys = pool['keys'] as { p256dh: string; auth: string }[];
    assert.equal(keys.length, 3);
    assert.equal(pool['poolEndpoints'], 100);
    const sub = subscriptionFromPool(ready.origin, keys, 42);
    const vapid = makeVapidKeys();
    const headers = { ttl: '60', 'content-encoding': 'aes128gcm', authorization: vapidAuthorization(vapid, ready.origin), topic: 'abc' };
    assert.equal((await client.request('POST', pathOf(sub.endpoint), headers, encrypt(Buffer.from('from the parent'), sub.keys))).status, 201);
    assert.equal((await client.request('POST', '/push/100', headers, encrypt(Buffer.from('x'), sub.keys))).status, 404, '--subscriptions bounds the pool');
    const received = json(await client.request('GET', `/__peer/received?endpoint=${encodeURIComponent(sub.endpoint)}`));
    const [message] = received['messages'] as { text: string; topic: string; endpoint: string }[];
    assert.equal(message?.text, 'from the parent');
    assert.equal(message?.topic, 'abc');
    assert.equal(message?.endpoint, sub.endpoint);
  } finally {
    await client.close();
  }
  // --exit-with-stdin: closing the pipe stops the peer.
  child.stdin.end();
  const [code] = (await once(child, 'exit')) as [number | null];
  assert.equal(code, 0);
});

test('bad arguments exit with status 2 and a usage message', async () => {
  const child = spawn(process.execPath, [cli, '--mode', 'fast'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  assert.equal(code, 2);
  assert.match(stderr, /--mode must be verify or count/);
});
