import { backoffMs, type BackoffOptions } from '@herald/backoff';
import { connectDedicated, type Pool } from '@herald/db';
import type { Logger } from '@herald/logging';
import type pg from 'pg';

/** Between two tries to listen again: up to 0.5 s, 1 s, ... 30 s (full jitter); due work is still found by polling meanwhile. */
const RELISTEN_BACKOFF: BackoffOptions = { baseMs: 500, capMs: 30_000 };

/**
 * Holds one connection LISTENing on `channel` (its own, outside the pool: see connectDedicated)
 * and calls `onNotify` for each NOTIFY, and once (re)connected, since anything committed while no
 * one listened is waiting. A lost connection (a database restart) logs one warning and is
 * replaced, backing off, until `stopped`.
 */
export async function listenForWakeups(pool: Pool, channel: string, onNotify: () => void, logger: Logger, stopped: Promise<void>): Promise<void> {
  let stopping = false;
  void stopped.then(() => (stopping = true));
  let failures = 0;
  while (!stopping) {
    let client: pg.Client | undefined;
    let failure: Error | undefined;
    try {
      client = await connectDedicated(pool);
      const lost = new Promise<void>((resolve) => {
        client?.on('error', (err) => {
          failure = err;
          resolve();
        });
      });
      client.on('notification', onNotify);
      await client.query(`LISTEN ${channel}`);
      if (failures > 0) logger.info({ channel }, 'listening for wake-ups again');
      failures = 0;
      onNotify();
      await Promise.race([lost, stopped]);
      if (!failure) await client.query(`UNLISTEN ${channel}`);
    } catch (err) {
      failure = err as Error;
    }
    client?.removeAllListeners('notification');
    await client?.end().catch(() => undefined);
    if (failure && !stopping) {
      if (failures === 0) logger.warn({ err: failure, channel }, 'lost the LISTEN connection; reconnecting (due work is still found by polling)');
      failures += 1;
      await Promise.race([new Promise((resolve) => setTimeout(resolve, backoffMs(failures, RELISTEN_BACKOFF))), stopped]);
    }
  }
}
