#!/usr/bin/env node
// One worker process of the work-loop benchmark (bench/workloop.ts starts several): fires the due
// items of BENCH_SCHEMA.items, recording each firing in BENCH_SCHEMA.fired in the statement that
// finishes it. MODE=loop runs @herald/workloop (leased batch claims, sleep until the next due
// row); MODE=baseline runs the shape it replaced (lock due rows in a transaction, work them, commit;
// poll every 250 ms when idle). Listens on WORKER_PORT once running, as a readiness signal.
import { createServer } from 'node:net';

import { createPool, withTransaction } from '@herald/db';
import { createLogger } from '@herald/logging';
import { RELEASED, startWorkLoop } from '@herald/workloop';

const schema = process.env.BENCH_SCHEMA ?? '';
const worker = process.env.WORKER_NAME ?? 'worker';
const mode = process.env.MODE === 'baseline' ? 'baseline' : 'loop';
const batch = Number(process.env.BENCH_BATCH ?? 1_000);
const logger = createLogger(`workloop-${worker}`, 'warn');
const pool = createPool({ url: process.env.DATABASE_URL ?? '', schema, max: 6, applicationName: `bench-${worker}` });

/** Fires `ids` (held under `claim` in loop mode): one statement finishes them and logs the firing. */
const FIRE = `WITH done AS (UPDATE ${schema}.items SET fired_at = clock_timestamp(), ${RELEASED} WHERE id = ANY($1) AND claim = $2 RETURNING id, due_at)
  INSERT INTO ${schema}.fired (id, worker, lateness_ms) SELECT id, $3, extract(epoch FROM clock_timestamp() - due_at) * 1000 FROM done`;

let stop: () => Promise<void>;
if (mode === 'loop') {
  const loop = startWorkLoop<{ id: string }>({
    name: worker,
    pool,
    logger,
    table: { table: `${schema}.items`, key: ['id'], due: 'due_at', waiting: 'fired_at IS NULL', returning: 'id' },
    leaseMs: 10_000,
    batchSize: batch,
    concurrency: batch * 4,
    pollMs: 1_000,
    work: async (rows, token) => {
      await pool.query(FIRE, [rows.map((row) => row.id), token, worker]);
    },
  });
  stop = () => loop.stop();
} else {
  let stopping = false;
  const running = (async () => {
    while (!stopping) {
      const fired = await withTransaction(pool, async (tx) => {
        const { rows } = await tx.query<{ id: string }>(
          `SELECT id FROM ${schema}.items WHERE fired_at IS NULL AND namespace = '' AND due_at <= clock_timestamp() ORDER BY due_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
          [batch],
        );
        if (rows.length > 0) {
          await tx.query(
            `WITH done AS (UPDATE ${schema}.items SET fired_at = clock_timestamp() WHERE id = ANY($1) RETURNING id, due_at)
             INSERT INTO ${schema}.fired (id, worker, lateness_ms) SELECT id, $2, extract(epoch FROM clock_timestamp() - due_at) * 1000 FROM done`,
            [rows.map((row) => row.id), worker],
          );
        }
        return rows.length;
      }).catch(() => 0);
      if (fired < batch) await new Promise((resolve) => setTimeout(resolve, 250));
    }
  })();
  stop = async () => {
    stopping = true;
    await running;
  };
}

const ready = createServer().listen(Number(process.env.WORKER_PORT), '127.0.0.1');
process.once('SIGTERM', () => {
  ready.close();
  void stop().finally(() => pool.end().finally(() => process.exit(0)));
});
