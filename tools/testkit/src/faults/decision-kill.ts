import type { Fault } from './drill.js';
import { killService, requestsMetIt } from './inject.js';

/**
 * `kill -9` of the decision service, replaced after the hold: questions opened, delivered and
 * answered across it. Reconciled with every question: each web push delivery made once by the
 * replacement (or skipped, answered first), each answer applied once and readable.
 */
export const decisionKill: Fault = {
  name: 'decision-kill',
  inject: (load) => killService(load, 'decision', { QUESTION_DELIVERY_POLL_MS: '100' }),
  bit: requestsMetIt,
};
