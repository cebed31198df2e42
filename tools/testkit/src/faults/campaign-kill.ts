import type { Fault } from './drill.js';
import { killService, requestsMetIt } from './inject.js';

/**
 * `kill -9` of the campaign service, replaced after the hold: sends and campaigns are refused
 * (503) or held meanwhile, and what it had accepted is fanned out once by the replacement
 * (reconciled with every notification: each subscriber pushed once).
 */
export const campaignKill: Fault = {
  name: 'campaign-kill',
  inject: (load) => killService(load, 'campaign', { CAMPAIGN_TIMER_POLL_MS: '100' }),
  bit: requestsMetIt,
};
