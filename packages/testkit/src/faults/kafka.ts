import { setTimeout as sleep } from 'node:timers/promises';

import { untilConsumingAgain } from '../consumers.js';
import { KAFKA_RECOVERY_BAR_MS, RECOVERY_LIMIT_MS, SITE_ORIGIN, type Fault, type FaultRow } from './drill.js';
import { bounceServer, requestsMetIt } from './inject.js';
import type { Load } from './load.js';

/**
 * After Kafka's return (`from`): how long until every consumer group has consumed again and the
 * engagement endpoint answered 202 (a report already accepted, made again: counted once), what
 * the row's recovery is, failed above KAFKA_RECOVERY_BAR_MS; and, as for every fault, a send made
 * then reaching every subscriber.
 */
async function kafkaRecovery(load: Load, row: FaultRow, from: number): Promise<number | undefined> {
  const { settings, stack, acceptedReports, request } = load;
  const engagement = (async (): Promise<number | undefined> => {
    while (Date.now() < from + RECOVERY_LIMIT_MS) {
      const accepted = [...acceptedReports.values()].at(-1);
      if (accepted) {
        const { outcome } = await request('engagement probe', '/api/v1/events', { method: 'POST', headers: { origin: SITE_ORIGIN }, body: { type: accepted.kind, token: accepted.token } });
        if (outcome === 202) return Date.now() - from;
      }
      await sleep(100);
    }
    return undefined;
  })();
  const [consuming, engaged, endToEnd] = await Promise.all([untilConsumingAgain(stack.topicPrefix, settings.groups, RECOVERY_LIMIT_MS), engagement, load.recovery(from)]);
  const slowest = [...consuming].sort(([, a], [, b]) => b - a)[0];
  const missing = settings.groups.filter(({ group }) => !consuming.has(group)).map(({ group }) => group);
  settings.log(`  every group consuming again in ${slowest?.[1] ?? '-'} ms (slowest ${slowest?.[0] ?? '-'}), engagement 202 in ${engaged ?? '-'} ms, a send end to end in ${endToEnd ?? '-'} ms`);
  if (missing.length > 0) row.problems.push(`consumer groups not consuming again within ${RECOVERY_LIMIT_MS / 1_000} s: ${missing.join(', ')}`);
  if (engaged === undefined) row.problems.push(`the engagement endpoint did not answer 202 within ${RECOVERY_LIMIT_MS / 1_000} s`);
  if (missing.length > 0 || engaged === undefined || endToEnd === undefined || slowest === undefined) return undefined;
  const recovered = Math.max(slowest[1], engaged);
  if (recovered > KAFKA_RECOVERY_BAR_MS) row.problems.push(`consumers (slowest ${slowest[0]}: ${slowest[1]} ms) and engagement (${engaged} ms) back in ${recovered} ms, over ${KAFKA_RECOVERY_BAR_MS / 1_000} s`);
  return recovered;
}

/**
 * Kafka stopped (controlled shutdown) or crashed (`kill -9`: an unclean shutdown, its logs
 * recovered), and started. Engagement reports answer 503 meanwhile and outbox rows wait; it
 * recovers when every consumer group consumes again and engagement answers 202 (kafkaRecovery).
 * Reconciled with every record: what the outboxes held published once, every consumer caught up.
 */
export const kafkaRestart: Fault = {
  name: 'kafka-restart',
  inject: (load) => bounceServer(load, 'kafka', 'restart'),
  bit: requestsMetIt,
  recover: kafkaRecovery,
};

export const kafkaCrash: Fault = {
  name: 'kafka-crash',
  inject: (load) => bounceServer(load, 'kafka', 'crash'),
  bit: requestsMetIt,
  recover: kafkaRecovery,
};
