/** Response classification and retry backoff. */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { backoffMs, classifyResponse, parseRetryAfter } from '../src/index.js';

const NOW = Date.UTC(2025, 0, 15, 12, 0, 0);

test('statuses map to sent / expired / failed / retry', () => {
  for (const s of [200, 201, 202]) assert.deepEqual(classifyResponse(s), { outcome: 'sent' });
  for (const s of [404, 410]) assert.deepEqual(classifyResponse(s), { outcome: 'expired' });
  for (const s of [400, 401, 403, 405, 413, 415, 422, 301, 302, 100]) assert.deepEqual(classifyResponse(s), { outcome: 'failed' }, String(s));
  for (const s of [408, 429, 500, 502, 503, 504]) assert.deepEqual(classifyResponse(s), { outcome: 'retry' }, String(s));
});

test('retry honours Retry-After in seconds and as an HTTP-date; other outcomes ignore it', () => {
  assert.deepEqual(classifyResponse(429, '120', NOW), { outcome: 'retry', retryAfterMs: 120_000 });
  assert.deepEqual(classifyResponse(503, ' 0 ', NOW), { outcome: 'retry', retryAfterMs: 0 });
  assert.deepEqual(classifyResponse(503, 'Wed, 15 Jan 2025 12:01:30 GMT', NOW), { outcome: 'retry', retryAfterMs: 90_000 });
  assert.deepEqual(classifyResponse(503, 'Wed, 15 Jan 2025 11:00:00 GMT', NOW), { outcome: 'retry', retryAfterMs: 0 });
  assert.deepEqual(classifyResponse(429, 'soon', NOW), { outcome: 'retry' });
  assert.deepEqual(classifyResponse(429, '-5', NOW), { outcome: 'retry' });
  assert.deepEqual(classifyResponse(429, '1.5', NOW), { outcome: 'retry' });
  assert.deepEqual(classifyResponse(429, null, NOW), { outcome: 'retry' });
  assert.deepEqual(classifyResponse(201, '120', NOW), { outcome: 'sent' });
  assert.deepEqual(classifyResponse(410, '120', NOW), { outcome: 'expired' });
  assert.equal(parseRetryAfter('Wednesday, 15-Jan-25 12:00:10 GMT', NOW), 10_000); // RFC 850 form
  assert.equal(parseRetryAfter('', NOW), undefined);
});

test('backoff: full jitter in [0, min(cap, base*2^(n-1))), exponential, capped', () => {
  const opts = { baseMs: 1000, capMs: 60_000 };
  assert.equal(backoffMs(1, undefined, { ...opts, random: () => 0 }), 0);
  assert.equal(backoffMs(1, undefined, { ...opts, random: () => 0.999999 }), 999);
  assert.equal(backoffMs(3, undefined, { ...opts, random: () => 0.5 }), 2000);
  assert.equal(backoffMs(4, undefined, { ...opts, random: () => 0.999999 }), 7999);
  assert.equal(backoffMs(20, undefined, { ...opts, random: () => 0.999999 }), 59_999);
  assert.equal(backoffMs(5000, undefined, { ...opts, random: () => 0.5 }), 30_000);
  for (let attempt = 1; attempt <= 12; attempt++) {
    const ceiling = Math.min(60_000, 1000 * 2 ** (attempt - 1));
    let lo = Infinity;
    let hi = -Infinity;
    for (let i = 0; i < 2000; i++) {
      const d = backoffMs(attempt, undefined, opts);
      assert.ok(Number.isInteger(d) && d >= 0 && d < ceiling, `attempt ${attempt}: ${d}`);
      lo = Math.min(lo, d);
      hi = Math.max(hi, d);
    }
    assert.ok(lo < ceiling * 0.1 && hi > ceiling * 0.9, `attempt ${attempt} spreads over the range: ${lo}..${hi}`);
  }
  assert.throws(() => backoffMs(0), RangeError);
});

test('backoff never goes below Retry-After, even above the cap', () => {
  const opts = { baseMs: 1000, capMs: 60_000 };
  assert.equal(backoffMs(1, 5000, { ...opts, random: () => 0.9 }), 5000);
  assert.equal(backoffMs(10, 5000, { ...opts, random: () => 0.5 }), 30_000);
  assert.equal(backoffMs(10, 3_600_000, { ...opts, random: () => 0.99 }), 3_600_000);
  assert.equal(backoffMs(2, 1500.2, { ...opts, random: () => 0 }), 1501);
  for (let i = 0; i < 1000; i++) assert.ok(backoffMs(1 + (i % 8), 7000, opts) >= 7000);
});
