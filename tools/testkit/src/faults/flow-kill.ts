import type { Fault } from './drill.js';
import { killService } from './inject.js';

/**
 * `kill -9` of the flow service, replaced after the hold. No client talks to it: its runs wait,
 * and those it had claimed are worked again when their lease ends (FLOW_ENV). It recovers when a
 * subscription made after it got its welcome push; reconciled with every welcome run: one per
 * stored subscription, completed, each step pushed once.
 */
export const flowKill: Fault = {
  name: 'flow-kill',
  inject: (load) => killService(load, 'flow', {}),
  bit: () => 'no flow process serving',
  recover: (load, _row, from) => load.flowRecovery(from),
};
