import { setTimeout as sleep } from 'node:timers/promises';

import type { FaultRule } from '@herald/push-peer';

import { infraComponent, type InfraComponent } from '../infra.js';
import type { RunningProcess } from '../processes.js';
import { isDown, type FaultRow } from './drill.js';
import type { Load } from './load.js';

// What several faults inject with, and the proof most of them give: the shared half of the fault modules.

/** Kills one process with SIGKILL; its pid and how it ended, as the fault's proof. */
export async function kill(load: Load, victim: RunningProcess): Promise<string> {
  load.killed.add(victim);
  victim.child.kill('SIGKILL');
  await victim.exited;
  if (victim.child.signalCode !== 'SIGKILL') throw new Error(`pid ${victim.child.pid} ended by ${victim.child.signalCode ?? `exit ${victim.child.exitCode}`}, not SIGKILL`);
  return `pid ${victim.child.pid} SIGKILLed`;
}

/** Kills a running `name` service (the kill itself is made before this first yields), holds, and starts its replacement. */
export async function killService(load: Load, name: string, env: Record<string, string>): Promise<string> {
  const { stack, settings } = load;
  const victim = stack.services.find((running) => !isDown(running) && running.output().includes(`${name} service serving`));
  if (!victim) throw new Error(`no running ${name} service to kill`);
  const killedPid = await kill(load, victim);
  await sleep(settings.holdMs);
  const starting = Date.now();
  // Like the gateway's: a replacement that misses its 20 s to get ready on a machine this busy gets a second try, as an orchestrator would.
  await stack.startService(name, env, { replacing: true }).catch(() => stack.startService(name, env, { replacing: true }));
  settings.log(`  ${name} replacement ready in ${Date.now() - starting} ms`);
  const replacement = stack.services.findLast((running) => !isDown(running) && running.output().includes(`${name} service serving`));
  return `${killedPid}, replaced by pid ${replacement?.child.pid ?? '?'}`;
}

/**
 * Stops PostgreSQL, Kafka or Redis cleanly (`restart`) or with SIGKILL (`crash`: PostgreSQL
 * recovers from its WAL, Kafka its logs, Redis starts empty), holds (`during` runs then), and
 * starts it again. A server that was not running, or is the same process afterwards, is no fault:
 * it throws.
 */
export async function bounceServer(load: Load, component: InfraComponent, how: 'restart' | 'crash', during: () => Promise<void> = async () => undefined): Promise<string> {
  const { peer, settings } = load;
  const before = await infraComponent('pid', component);
  // Slow pushes while it goes: some are in flight then, and their outcome must be recorded once it is back.
  peer.respondWith({ delayMs: 1_000 });
  try {
    await infraComponent(how === 'crash' ? 'crash' : 'stop', component);
    await sleep(settings.holdMs);
    await during();
  } finally {
    // Started again whatever happened above: a server left down would fail every later test on this machine.
    peer.respondWith(null);
    await infraComponent('start', component);
  }
  const after = await infraComponent('pid', component);
  if (after === before) throw new Error(`${component} is still pid ${before}: the ${how} did not happen`);
  return `pid ${before} -> ${after}`;
}

/** The push service answers by `rule` for the hold. */
export async function pushServiceFailing(load: Load, rule: FaultRule): Promise<string> {
  load.peer.respondWith(rule);
  await sleep(load.settings.holdMs);
  load.peer.respondWith(null);
  return 'push service failing';
}

/** The proof of a dependency gone: requests during the row refused, cut off or held. */
export function requestsMetIt(load: Load, row: FaultRow): string | undefined {
  const failedRequests = ['503', '500', 'timeout', 'network'].reduce((sum, key) => sum + (row.errors[key] ?? 0), 0);
  const heldRequests = load.held.get(row) ?? 0;
  return failedRequests + heldRequests > 0 ? `${failedRequests} requests refused or cut off, ${heldRequests} held` : undefined;
}

/** The proof of a push service failing: what it answered the delivery fleet during the row. */
export function pushesMetIt(row: FaultRow, status: string, what: string): string | undefined {
  const count = row.errors[`push ${status}`] ?? 0;
  return count > 0 ? `${count} pushes ${what}` : undefined;
}
