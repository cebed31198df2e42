import type { Fault } from './drill.js';
import { pushesMetIt, pushServiceFailing } from './inject.js';

/**
 * The push service failing for the hold: 429 with Retry-After, 503, or every stream reset. The
 * delivery fleet retries; reconciled with every notification: each subscriber pushed once, none
 * failed after its attempts.
 */
export const push429: Fault = {
  name: 'push-429',
  inject: (load) => pushServiceFailing(load, { status: 429, retryAfter: 1 }),
  bit: (_load, row) => pushesMetIt(row, '429', 'answered 429'),
};

export const push503: Fault = {
  name: 'push-503',
  inject: (load) => pushServiceFailing(load, { status: 503 }),
  bit: (_load, row) => pushesMetIt(row, '503', 'answered 503'),
};

export const pushReset: Fault = {
  name: 'push-reset',
  inject: (load) => pushServiceFailing(load, { resetStream: true }),
  bit: (_load, row) => pushesMetIt(row, 'reset', 'reset'),
};
