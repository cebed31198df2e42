import { setTimeout as sleep } from 'node:timers/promises';

import { GATEWAY_ENV, isDown, REQUEST_DEADLINE_MS, type Fault } from './drill.js';
import { kill } from './inject.js';

/**
 * `kill -9` of the second gateway: the load moves off it at once (as a balancer's health check
 * takes it out), a client holding its address meets a refused connection, and a replacement joins
 * the pool after the hold. A request cut off with it (`network`) is expected, and an ask whose 200
 * was lost with it was made all the same (reconciled with the questions).
 */
export const gatewayKill: Fault = {
  name: 'gateway-kill',
  async inject(load) {
    const { stack, pool, probed, rowAt, settings } = load;
    const victim = stack.gateways.find((running, index) => index > 0 && !isDown(running));
    const url = victim ? stack.gatewayUrls[stack.gateways.indexOf(victim)] : undefined;
    if (!victim || !url) throw new Error('no second gateway to kill');
    load.gatewayDown(true);
    const killing = kill(load, victim);
    pool.splice(pool.indexOf(url), 1);
    const killedPid = await killing;
    // A client that still had its address meets a refused connection.
    const refused = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(REQUEST_DEADLINE_MS) }).then(
      (response) => `its address still answered ${response.status}`,
      (err: unknown) => `a request to its address failed (${((err as Error).cause as { code?: string } | undefined)?.code ?? (err as Error).name})`,
    );
    probed.set(rowAt(Date.now()), refused);
    await sleep(settings.holdMs);
    // On a machine this busy a gateway may miss its 20 s to get ready: a second try, as an orchestrator would.
    const replacement = await stack.addGateway(GATEWAY_ENV).catch(() => stack.addGateway(GATEWAY_ENV));
    stack.gatewayUrls.push(replacement);
    pool.push(replacement);
    return killedPid;
  },
  bit(load, row) {
    const seen = load.probed.get(row);
    return seen?.startsWith('a request to its address failed') ? seen : undefined;
  },
};
