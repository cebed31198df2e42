/**
 * Herald's sender (encrypt + cached VAPID + pooled HTTP/2) next to the npm `web-push` package (encrypt +
 * per-message VAPID + HTTPS/1.1 keep-alive) sending the same messages to the same local push service over
 * loopback. The push service runs in a child process; the sender's CPU is measured with
 * process.cpuUsage(), so "per core" means messages per CPU-second of the sending process.
 *
 *   npm run bench -w @herald/webpush           (after `npx tsc -b`)
 *   BENCH_MESSAGES=20000 BENCH_CONCURRENCY=100 BENCH_ROUNDS=8 ...   to change the defaults
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createECDH, randomBytes } from 'node:crypto';
import https from 'node:https';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

import webpush from 'web-push';

import { encrypt, generateVapidKeys, originOf, PushClient, VapidSigner } from '../src/index.js';
import { selfSignedCert } from '../test/helpers/cert.js';

const MESSAGES = Number(process.env['BENCH_MESSAGES'] ?? 20_000);
const WARMUP = Number(process.env['BENCH_WARMUP'] ?? 2_000);
const CONCURRENCY = Number(process.env['BENCH_CONCURRENCY'] ?? 100);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 8);
const PAYLOAD_BYTES = 200;
const SUBSCRIBERS = 1_000;
const ENCRYPT_OPS = 5_000;

interface Measure {
  messages: number;
  wallMs: number;
  cpuUs: number;
  errors: number;
}

interface ServerStats {
  h2Requests: number;
  h1Requests: number;
  h2Sessions: number;
  tlsConnections: number;
  bytes: number;
}

function request<T>(child: ChildProcess, message: string, key: string): Promise<T> {
  return new Promise((resolve) => {
    const onMessage = (m: unknown): void => {
      if (m !== null && typeof m === 'object' && key in m) {
        child.off('message', onMessage);
        resolve((m as Record<string, T>)[key]!);
      }
    };
    child.on('message', onMessage);
    if (message !== '') child.send(message);
  });
}

async function measure(count: number, concurrency: number, sendOne: (i: number) => Promise<void>): Promise<Measure> {
  let next = 0;
  let errors = 0;
  let firstError: unknown;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (;;) {
        const i = next++;
        if (i >= count) return;
        try {
          await sendOne(i);
        } catch (err) {
          errors++;
          firstError ??= err;
        }
      }
    }),
  );
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  if (firstError !== undefined) console.error('first error:', firstError);
  return { messages: count, wallMs, cpuUs: cpu.user + cpu.system, errors };
}

function add(a: Measure, b: Measure): Measure {
  return { messages: a.messages + b.messages, wallMs: a.wallMs + b.wallMs, cpuUs: a.cpuUs + b.cpuUs, errors: a.errors + b.errors };
}

const fmt = (n: number, digits = 0): string => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

async function main(): Promise<void> {
  const started = performance.now();
  const cert = selfSignedCert();
  const child = fork(fileURLToPath(new URL('./server.js', import.meta.url)), [], {
    env: { ...process.env, BENCH_TLS_KEY: cert.key.toString(), BENCH_TLS_CERT: cert.cert.toString() },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await request<number>(child, '', 'port');
  const origin = `https://127.0.0.1:${port}`;

  const subscribers = Array.from({ length: SUBSCRIBERS }, (_, i) => {
    const ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
    return {
      endpoint: `${origin}/wpush/v2/${i.toString(36).padStart(6, '0')}`,
      keys: { p256dh: ecdh.getPublicKey('base64url'), auth: randomBytes(16).toString('base64url') },
    };
  });
  const payload = randomBytes(PAYLOAD_BYTES);
  const vapid = { ...generateVapidKeys(), subject: 'mailto:bench@herald.example' };

  // (a) this library
  const client = new PushClient({ tls: { ca: cert.cert }, maxConcurrentStreams: CONCURRENCY });
  const signer = new VapidSigner();
  const herald = async (i: number): Promise<void> => {
    const sub = subscribers[i % SUBSCRIBERS]!;
    const response = await client.send({
      endpoint: sub.endpoint,
      body: encrypt(payload, sub.keys),
      ttl: 60,
      vapidAuthorization: signer.authorization(vapid, originOf(sub.endpoint)),
    });
    if (response.status !== 201) throw new Error(`status ${response.status}`);
  };

  // (b) web-push, with a keep-alive agent that trusts the test certificate (Node 20's global agent is keep-alive too)
  const agent = new https.Agent({ keepAlive: true, ca: cert.cert });
  const vapidDetails = { subject: vapid.subject, publicKey: vapid.publicKey, privateKey: vapid.privateKey };
  const reference = async (i: number): Promise<void> => {
    const sub = subscribers[i % SUBSCRIBERS]!;
    const response = await webpush.sendNotification(sub, payload, { vapidDetails, TTL: 60, agent });
    if (response.statusCode !== 201) throw new Error(`status ${response.statusCode}`);
  };

  // encrypt only
  const sub0 = subscribers.map((s) => s.keys);
  for (let i = 0; i < 500; i++) encrypt(payload, sub0[i % SUBSCRIBERS]!);
  const eCpu0 = process.cpuUsage();
  const e0 = performance.now();
  for (let i = 0; i < ENCRYPT_OPS; i++) encrypt(payload, sub0[i % SUBSCRIBERS]!);
  const eWall = performance.now() - e0;
  const eCpu = process.cpuUsage(eCpu0);

  // warm-up both (JIT, TLS sessions, connection pools)
  await measure(WARMUP, CONCURRENCY, herald);
  await measure(WARMUP, CONCURRENCY, reference);
  const before = await request<ServerStats>(child, 'stats', 'stats');

  // measured: alternate rounds so background load on the machine falls on both alike
  const per = Math.ceil(MESSAGES / ROUNDS);
  let a: Measure = { messages: 0, wallMs: 0, cpuUs: 0, errors: 0 };
  let b: Measure = { ...a };
  for (let r = 0; r < ROUNDS; r++) {
    const n = Math.min(per, MESSAGES - r * per);
    if (r % 2 === 0) {
      a = add(a, await measure(n, CONCURRENCY, herald));
      b = add(b, await measure(n, CONCURRENCY, reference));
    } else {
      b = add(b, await measure(n, CONCURRENCY, reference));
      a = add(a, await measure(n, CONCURRENCY, herald));
    }
  }
  const after = await request<ServerStats>(child, 'stats', 'stats');
  await client.close();
  agent.destroy();
  child.send('exit');

  const row = (name: string, m: Measure): string[] => [
    name,
    fmt(m.messages),
    fmt(m.errors),
    fmt(m.wallMs / 1000, 2),
    fmt(m.messages / (m.wallMs / 1000)),
    fmt(m.cpuUs / 1e6, 2),
    fmt(m.cpuUs / 1e6 / (m.messages / 1000), 3),
    fmt(m.messages / (m.cpuUs / 1e6)),
  ];
  const table = [
    ['sender', 'messages', 'errors', 'wall s', 'msg/s (wall)', 'CPU s', 'CPU s / 1k msg', 'msg/s per core'],
    row('@herald/webpush (h2)', a),
    row('web-push 3.6.7 (https/1.1)', b),
  ];
  const widths = table[0]!.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
  const cpus = os.cpus();
  console.log(`\nWeb Push sending benchmark: node ${process.version}, ${cpus.length} x ${cpus[0]?.model ?? '?'}, load avg ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  console.log(`${fmt(MESSAGES)} messages each after ${fmt(WARMUP)} warm-up, ${PAYLOAD_BYTES}-byte payload, ${SUBSCRIBERS} subscribers cycled, ${CONCURRENCY} in flight, ${ROUNDS} alternating rounds, loopback TLS\n`);
  for (const r of table) console.log(r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  '));
  const perCoreA = a.messages / (a.cpuUs / 1e6);
  const perCoreB = b.messages / (b.cpuUs / 1e6);
  console.log(`\nratio per core (msgs per CPU-second): ${(perCoreA / perCoreB).toFixed(2)}x   ratio wall-clock: ${(b.wallMs / a.wallMs).toFixed(2)}x   (bar: >= 3.5x per core)`);
  console.log(`encrypt only: ${fmt(ENCRYPT_OPS / (eWall / 1000))} ops/s wall, ${fmt((eCpu.user + eCpu.system) / ENCRYPT_OPS, 1)} us CPU per op`);
  console.log(
    `push service saw (measured part): h2 requests ${fmt(after.h2Requests - before.h2Requests)}, http/1.1 requests ${fmt(after.h1Requests - before.h1Requests)}; ` +
      `over the whole run: ${after.h2Sessions} h2 session(s), ${after.tlsConnections} TLS connections`,
  );
  console.log(`total run time ${fmt((performance.now() - started) / 1000, 1)} s`);
  if (a.errors > 0 || b.errors > 0) process.exitCode = 1;
}

await main();
