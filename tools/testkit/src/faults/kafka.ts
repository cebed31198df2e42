import { setTimeout as sleep } from 'node:timers/promises';

import { coordinatorsBack, untilConsumingAgain } from '../consumers.js';
import { KAFKA_RECOVERY_BAR_MS, RECOVERY_LIMIT_MS, SITE_ORIGIN, type Fault, type FaultRow } from './drill.js';
import { bounceServer, requestsMetIt } from './inject.js';
import type { Load } from './load.js';

/**
 * After Kafka's return: how long until every consumer group has consumed again and the engagement
 * endpoint answered 202 (a report already accepted, made again: counted once), what the row's
 * recovery is, failed above KAFKA_RECOVERY_BAR_MS; and, as for every fault, a send made then
 * reaching every subscriber. Counted from the moment the broker coordinates the stack's groups
 * again (it loads every group's metadata first, which the log line reports apart): what Herald's
 * clients take, not what the broker takes to load.
 */
async function kafkaRecovery(load: Load, row: FaultRow, from: number): Promise<number | undefined> {
  const { settings, stack, acceptedReports, request } = load;
  let engagedAt: number | undefined;
  const engagement = (async (): Promise<void> => {
    while (Date.now() < from + RECOVERY_LIMIT_MS) {
      const accepted = [...acceptedReports.values()].at(-1);
      if (accepted) {
        const { outcome } = await request('engagement probe', '/api/v1/events', { method: 'POST', headers: { origin: SITE_ORIGIN }, body: { type: accepted.kind, token: accepted.token } });
        if (outcome === 202) {
          engagedAt = Date.now();
          return;
        }
      }
      await sleep(100);
    }
  })();
  const endToEnd = load.recovery(from);
  await coordinatorsBack(stack.topicPrefix, settings.groups, RECOVERY_LIMIT_MS);
  const back = Date.now();
  const { back: consuming, idle } = await untilConsumingAgain(stack.topicPrefix, settings.groups, RECOVERY_LIMIT_MS);
  await engagement;
  const engaged = engagedAt === undefined ? undefined : Math.max(0, engagedAt - back);
  settings.log(`  the broker coordinating the groups again ${back - from} ms after it started`);
  const slowest = [...consuming].sort(([, a], [, b]) => b - a)[0];
  const missing = settings.groups.filter(({ group }) => !consuming.has(group) && !idle.includes(group)).map(({ group }) => group);
  if (idle.length > 0) settings.log(`  nothing to consume since (caught up, no message came): ${idle.join(', ')}`);
  const endToEndMs = await endToEnd;
  settings.log(`  from then, every group consuming again in ${slowest?.[1] ?? '-'} ms (slowest ${slowest?.[0] ?? '-'}), engagement 202 in ${engaged ?? '-'} ms; a send end to end ${endToEndMs ?? '-'} ms after the broker started`);
  if (missing.length > 0) row.problems.push(`consumer groups not consuming again within ${RECOVERY_LIMIT_MS / 1_000} s: ${missing.join(', ')}`);
  if (engaged === undefined) row.problems.push(`the engagement endpoint did not answer 202 within ${RECOVERY_LIMIT_MS / 1_000} s`);
  if (missing.length > 0 || engaged === undefined || endToEndMs === undefined || slowest === undefined) return undefined;
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
