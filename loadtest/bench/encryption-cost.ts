#!/usr/bin/env node
// The encryption's own CPU cost per push, for bench:send's "outside the encryption" figure. Run by
// the send benchmark as a process of its own on the services' Node, so nothing else in it takes
// CPU: RFC 8291 encrypt() (fresh ECDH key pair, HKDF, AES-128-GCM), exactly as the delivery fleet
// calls it, of a push-sized payload for subscribers of the benchmark's key pool, timed by this
// process's CPU clock. Prints one JSON line: {"messages", "payloadBytes", "cpuMsPerPush"}.
//
//   node loadtest/dist/bench/encryption-cost.js <key pool file> <messages> <payload bytes>
import { readFile } from 'node:fs/promises';

import { validateKeyPool } from '@herald/push-peer';
import { encrypt } from '@herald/webpush';

const [poolFile, messagesArg, bytesArg] = process.argv.slice(2);
const messages = Number(messagesArg);
const payloadBytes = Number(bytesArg);
if (!poolFile || !Number.isInteger(messages) || messages < 1 || !Number.isInteger(payloadBytes) || payloadBytes < 1) {
  throw new Error('usage: encryption-cost.js <key pool file> <messages> <payload bytes>');
}
const pool = validateKeyPool(JSON.parse(await readFile(poolFile, 'utf8')));
const payload = Buffer.alloc(payloadBytes, 'x');
const encryptFor = (index: number): Buffer => encrypt(payload, pool[index % pool.length]!);

// Warm up (JIT, OpenSSL's tables), then time.
for (let index = 0; index < Math.min(1_000, messages); index += 1) encryptFor(index);
const before = process.cpuUsage();
for (let index = 0; index < messages; index += 1) encryptFor(index);
const used = process.cpuUsage(before);
console.log(JSON.stringify({ messages, payloadBytes, cpuMsPerPush: (used.user + used.system) / 1_000 / messages }));
