#!/usr/bin/env node
// Benchmark: how long a 401 takes for a known key id with a wrong secret, and for an unknown id
// (issue #22, finding 8), through one gateway and the account service on the local PostgreSQL.
// The two kinds are sent interleaved in a random order, one at a time, so drift in the machine's
// load falls on both alike; the medians and a Mann-Whitney U test (normal approximation) are printed.
//
//   npm run bench:key-timing           (infra must be up)
//
// Settings (environment): KEY_TIMING_ROUNDS=4  KEY_TIMING_PER_ROUND=200  KEY_TIMING_WARMUP=100
import { randomBytes, randomInt } from 'node:crypto';

import { createWorkspace, SERVER_API, startStack } from '@herald/testkit';

import { intEnv } from './lib/bench.js';

const rounds = intEnv('KEY_TIMING_ROUNDS', 4);
const perRound = intEnv('KEY_TIMING_PER_ROUND', 200);
const warmup = intEnv('KEY_TIMING_WARMUP', 100);

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
const randomId = () => Array.from({ length: 16 }, () => BASE32[randomInt(32)]).join('');
const randomSecret = () => randomBytes(32).toString('base64url');

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
};

/** Two-sided p of Mann-Whitney U (normal approximation, no tie correction: times are continuous). */
function mannWhitneyP(a: number[], b: number[]): number {
  const all = [...a.map((value) => ({ value, inA: true })), ...b.map((value) => ({ value, inA: false }))].sort((x, y) => x.value - y.value);
  let rankSumA = 0;
  all.forEach((entry, index) => {
    if (entry.inA) rankSumA += index + 1;
  });
  const u = rankSumA - (a.length * (a.length + 1)) / 2;
  const mean = (a.length * b.length) / 2;
  const sd = Math.sqrt((a.length * b.length * (a.length + b.length + 1)) / 12);
  const z = Math.abs(u - mean) / sd;
  // erfc(z / sqrt 2) by Abramowitz-Stegun 7.1.26.
  const x = z / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * x);
  const erfc = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))) * Math.exp(-x * x);
  return erfc;
}

const stack = await startStack();
try {
  const workspace = await createWorkspace('enterprise');
  const knownId = workspace.apiKey.split('.')[0] as string;
  const url = `${stack.gatewayUrl}${SERVER_API}/identity`;
  async function timed(key: string): Promise<number> {
    const started = performance.now();
    const response = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
    await response.arrayBuffer();
    const elapsed = performance.now() - started;
    if (response.status !== 401) throw new Error(`expected 401, got ${response.status}`);
    return elapsed;
  }
  // Each request a fresh secret: the gateway caches verified keys only, never a refusal's secret.
  const known = () => timed(`${knownId}.${randomSecret()}`);
  const unknown = () => timed(`pk_${randomId()}.${randomSecret()}`);
  for (let index = 0; index < warmup; index += 1) await (index % 2 === 0 ? known() : unknown());
  const times = { known: [] as number[], unknown: [] as number[] };
  for (let round = 0; round < rounds; round += 1) {
    const order = Array.from({ length: 2 * perRound }, (_, index) => index % 2 === 0);
    for (let index = order.length - 1; index > 0; index -= 1) {
      const other = randomInt(index + 1);
      [order[index], order[other]] = [order[other] as boolean, order[index] as boolean];
    }
    for (const isKnown of order) (isKnown ? times.known : times.unknown).push(await (isKnown ? known() : unknown()));
  }
  const ms = (value: number) => `${value.toFixed(3)} ms`;
  process.stdout.write(
    `key timing, ${rounds} x ${perRound} of each, interleaved:\n` +
      `  known id, wrong secret: median ${ms(median(times.known))}\n` +
      `  unknown id:             median ${ms(median(times.unknown))}\n` +
      `  difference of medians:  ${ms(median(times.known) - median(times.unknown))}; Mann-Whitney p = ${mannWhitneyP(times.known, times.unknown).toFixed(4)}\n`,
  );
} finally {
  await stack.stop();
}
