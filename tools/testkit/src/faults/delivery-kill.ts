import type { ReceivedMessage } from '@herald/push-peer';

import { eventually } from '../sending.js';
import type { Fault } from './drill.js';
import { killService } from './inject.js';

/**
 * `kill -9` of a delivery worker at its worst instant: the push service has accepted pushes
 * (counted, stored) and holds their 201, so the worker dies before it learnt so, let alone
 * recorded it. The next worker pushes them again, with their Topic: the browser replaces the first
 * (shown once, one impression). Reconciled: each such push was pushed again with the first's Topic
 * or not at all (the shared reconciliation counts a repeat as `repeated`, and as duplicated only
 * under another Topic; and the impressions counted once).
 */
export const deliveryKill: Fault = {
  name: 'delivery-kill',
  async inject(load) {
    const { peer, acceptedAtKill, rowAt } = load;
    const holdFrom = Date.now();
    const acceptedSince = (): ReceivedMessage[] => peer.received(undefined, { includeReplaced: true }).filter((message) => message.at >= holdFrom);
    peer.respondWith({ delayResponseMs: 3_000 });
    try {
      // On a busy machine a send can take a while to reach the fleet: the kill waits (bounded)
      // until the peer has accepted a push whose 201 it holds.
      await eventually('a push accepted and its 201 held', async () => acceptedSince().length, (held) => held > 0, 10_000).catch(() => undefined);
      const killing = killService(load, 'delivery', {});
      acceptedAtKill.set(rowAt(Date.now()), acceptedSince());
      return await killing;
    } finally {
      peer.respondWith(null);
    }
  },
  bit(load, row) {
    const accepted = load.acceptedAtKill.get(row)?.length ?? 0;
    return accepted > 0 ? `killed with ${accepted} pushes accepted and unanswered` : undefined;
  },
  reconcile(load, row) {
    const accepted = load.acceptedAtKill.get(row) ?? [];
    const all = load.peer.received(undefined, { includeReplaced: true });
    const again = accepted.filter((first) => all.some((later) => later.at > first.at && later.endpoint === first.endpoint && later.topic === first.topic));
    load.settings.log(`  delivery-kill: ${again.length} of the ${accepted.length} pushes accepted and unanswered at the kill were pushed again, each under its first's Topic`);
  },
};
