import assert from 'node:assert/strict';
import { test } from 'node:test';

import { backoffMs, type BackoffOptions } from '../src/index.js';

const options: BackoffOptions = { baseMs: 1000, capMs: 60_000 };
const ceilingOf = (attempt: number): number => Math.min(60_000, 1000 * 2 ** (attempt - 1));

/** The lowest and highest of 2,000 delays of one attempt, each checked to be an integer in [low, high). */
function spread(attempt: number, given: BackoffOptions, low: number, high: number): { min: number; max: number } {
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < 2000; i++) {
    const delay = backoffMs(attempt, given);
    assert.ok(Number.isInteger(delay) && delay >= low && delay < high, `attempt ${attempt}: ${delay} is not in [${low}, ${high})`);
    min = Math.min(min, delay);
    max = Math.max(max, delay);
  }
  return { min, max };
}

test('full jitter (the default): uniform in [0, c), c = min(cap, base*2^(n-1)), exponential, capped', () => {
  assert.equal(backoffMs(1, { ...options, random: () => 0 }), 0);
  assert.equal(backoffMs(1, { ...options, random: () => 0.999999 }), 999);
  assert.equal(backoffMs(3, { ...options, random: () => 0.5 }), 2000);
  assert.equal(backoffMs(4, { ...options, random: () => 0.999999 }), 7999);
  assert.equal(backoffMs(4, { ...options, jitter: 'full', random: () => 0.25 }), 2000);
  assert.equal(backoffMs(20, { ...options, random: () => 0.999999 }), 59_999);
  assert.equal(backoffMs(5000, { ...options, random: () => 0.5 }), 30_000);
  for (let attempt = 1; attempt <= 12; attempt++) {
    const ceiling = ceilingOf(attempt);
    const { min, max } = spread(attempt, options, 0, ceiling);
    assert.ok(min < ceiling * 0.05 && max > ceiling * 0.95, `attempt ${attempt} spreads over the whole step: ${min}..${max}`);
  }
});

test('equal jitter: uniform in [c/2, c), exponential, capped', () => {
  const equal: BackoffOptions = { ...options, jitter: 'equal' };
  assert.equal(backoffMs(1, { ...equal, random: () => 0 }), 500);
  assert.equal(backoffMs(1, { ...equal, random: () => 0.999999 }), 999);
  assert.equal(backoffMs(3, { ...equal, random: () => 0.5 }), 3000);
  assert.equal(backoffMs(20, { ...equal, random: () => 0.999999 }), 59_999);
  assert.equal(backoffMs(5000, { ...equal, random: () => 0.5 }), 45_000);
  for (let attempt = 1; attempt <= 12; attempt++) {
    const ceiling = ceilingOf(attempt);
    const { min, max } = spread(attempt, equal, ceiling / 2, ceiling);
    assert.ok(min < ceiling * 0.55 && max > ceiling * 0.95, `attempt ${attempt} spreads over the upper half: ${min}..${max}`);
  }
});

test('an attempt that is not an integer >= 1 is refused', () => {
  for (const attempt of [0, -1, 1.5, Number.NaN]) assert.throws(() => backoffMs(attempt, options), RangeError);
});

test('never below Retry-After, and never above the cap even for a longer Retry-After', () => {
  assert.equal(backoffMs(1, { ...options, random: () => 0.9 }, 5000), 5000);
  assert.equal(backoffMs(10, { ...options, random: () => 0.5 }, 5000), 30_000);
  assert.equal(backoffMs(10, { ...options, jitter: 'equal', random: () => 0.5 }, 5000), 45_000);
  assert.equal(backoffMs(10, { ...options, random: () => 0.99 }, 3_600_000), 60_000);
  assert.equal(backoffMs(2, { ...options, random: () => 0 }, 1500.2), 1501);
  // A Retry-After that is no time at all (0, negative, not a number) is no floor.
  for (const retryAfter of [0, -5, Number.NaN, Number.POSITIVE_INFINITY]) assert.equal(backoffMs(2, { ...options, random: () => 0 }, retryAfter), 0);
  for (let i = 0; i < 1000; i++) assert.ok(backoffMs(1 + (i % 8), options, 7000) >= 7000);
});
