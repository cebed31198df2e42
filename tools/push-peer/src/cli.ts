#!/usr/bin/env node
/**
 * Runs a push peer as its own process (for benchmarks, so the sender has the machine's other
 * cores). Prints one JSON line `{"origin", "ca"?, "mode", "pid", "control"}` on stdout when ready;
 * stop it with SIGTERM/SIGINT (or close its stdin with --exit-with-stdin). See README.md.
 */
import { parseArgs } from 'node:util';

import { readKeyPoolFile, type KeyPoolEntry } from './keypool.js';
import { startPushPeer } from './peer.js';
import type { PeerMode, PushPeerOptions } from './types.js';

const USAGE = `usage: node tools/push-peer/dist/src/cli.js [options]
  --mode verify|count              verify (default): full checks, decrypt, record; count: count 201s cheaply
  --tls | --h2c                    HTTPS with HTTP/2 + HTTP/1.1 (default) or cleartext HTTP/2 (prior knowledge)
  --host <addr>                    default 127.0.0.1
  --port <n>                       default 0 (a free port)
  --key-pool-file <path>           JSON {"keys":[{"privateKey","p256dh","auth"}]} (base64url); endpoint
                                   <origin>/push/<index> uses keys[index % keys.length]
  --key-pool <n>                   generate an n-key pool here instead; GET /__peer/key-pool gives its public half
  --subscriptions <n>              with a pool: only /push/0 .. /push/<n-1> exist (default: every index)
  --application-server-key <k>     with a pool: restrict pool endpoints to this VAPID key (base64url)
  --max-concurrent-streams <n>     HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS (default 100)
  --max-body-bytes <n>             413 above this (default 4096)
  --exit-with-stdin                exit when stdin closes (ties the peer's life to its parent's pipe)`;

function fail(message: string, code: number): never {
  process.stderr.write(`push-peer: ${message}\n`);
  process.exit(code);
}

function integer(value: string | undefined, name: string, min: number): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(n) || n < min) fail(`--${name} must be an integer >= ${min}\n${USAGE}`, 2);
  return n;
}

async function main(): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        mode: { type: 'string' },
        tls: { type: 'boolean' },
        h2c: { type: 'boolean' },
        host: { type: 'string' },
        port: { type: 'string' },
        'key-pool-file': { type: 'string' },
        'key-pool': { type: 'string' },
        subscriptions: { type: 'string' },
        'application-server-key': { type: 'string' },
        'max-concurrent-streams': { type: 'string' },
        'max-body-bytes': { type: 'string' },
        'exit-with-stdin': { type: 'boolean' },
        help: { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    fail(`${err instanceof Error ? err.message : String(err)}\n${USAGE}`, 2);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const mode = (values.mode ?? 'verify') as PeerMode;
  if (mode !== 'verify' && mode !== 'count') fail(`--mode must be verify or count\n${USAGE}`, 2);
  if (values.tls && values.h2c) fail('--tls and --h2c are exclusive', 2);
  if (values['key-pool-file'] !== undefined && values['key-pool'] !== undefined) fail('--key-pool-file and --key-pool are exclusive', 2);

  let keyPool: number | KeyPoolEntry[] | undefined = integer(values['key-pool'], 'key-pool', 1);
  if (values['key-pool-file'] !== undefined) {
    try {
      keyPool = await readKeyPoolFile(values['key-pool-file']);
    } catch (err) {
      fail(`cannot use --key-pool-file ${values['key-pool-file']}: ${err instanceof Error ? err.message : String(err)}`, 2);
    }
  }
  const subscriptions = integer(values.subscriptions, 'subscriptions', 0);
  if (keyPool === undefined && (subscriptions !== undefined || values['application-server-key'] !== undefined)) {
    fail('--subscriptions and --application-server-key need --key-pool-file or --key-pool', 2);
  }
  const options: PushPeerOptions = {
    mode,
    tls: !values.h2c,
    ...(values.host !== undefined ? { host: values.host } : {}),
    ...(values.port !== undefined ? { port: integer(values.port, 'port', 0)! } : {}),
    ...(keyPool !== undefined ? { keyPool, poolEndpoints: subscriptions ?? Infinity } : {}),
    ...(values['application-server-key'] !== undefined ? { poolApplicationServerKey: values['application-server-key'] } : {}),
    ...(values['max-concurrent-streams'] !== undefined ? { maxConcurrentStreams: integer(values['max-concurrent-streams'], 'max-concurrent-streams', 1)! } : {}),
    ...(values['max-body-bytes'] !== undefined ? { maxBodyBytes: integer(values['max-body-bytes'], 'max-body-bytes', 1)! } : {}),
  };
  let peer;
  try {
    peer = await startPushPeer(options);
  } catch (err) {
    fail(`cannot start: ${err instanceof Error ? err.message : String(err)}`, 1);
  }
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    void peer.close().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  if (values['exit-with-stdin']) {
    process.stdin.on('end', stop);
    process.stdin.on('close', stop);
    process.stdin.resume();
  }
  process.stdout.write(
    `${JSON.stringify({ origin: peer.origin, ...(peer.ca !== undefined ? { ca: peer.ca } : {}), mode: peer.mode, pid: process.pid, control: `${peer.origin}/__peer` })}\n`,
  );
}

void main();
