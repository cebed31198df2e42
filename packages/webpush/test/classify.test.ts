/** Response classification (the retry backoff is @herald/workloop's). */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { classifyResponse, parseRetryAfter } from '../src/index.js';

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
