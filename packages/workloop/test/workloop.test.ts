import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { createPool, type Pool } from '@herald/db';
import { createLogger } from '@herald/logging';
import { createDatabase, type TestDatabase } from '@herald/testkit';

import { claimStatement, LAPSED_COLUMN, RELEASED, startWorkLoop, type WorkTable } from '../src/index.js';

// The work loop against a real PostgreSQL, in a database of this file's own.

const logger = createLogger('workloop-test', process.env.TEST_LOG_LEVEL ?? 'silent');
let database: TestDatabase;
let pool: Pool;
const schema = `w${randomBytes(4).toString('hex')}`;

const table: WorkTable = { table: `${schema}.items`, key: ['id'], due: 'due_at', waiting: 'done_at IS NULL', returning: 'id, due_at', onClaim: 'claims = claims + 1' };
interface Item {
  id: number;
  due_at: Date;
}

before(async () => {
  database = await createDatabase();
  pool = createPool({ url: database.url, schema, max: 8, applicationName: 'workloop-test' });
  await pool.query(`CREATE SCHEMA ${schema}`);
  await pool.query(`CREATE TABLE ${schema}.items (
    id serial PRIMARY KEY, due_at timestamptz NOT NULL, done_at timestamptz, done_by text, claims int NOT NULL DEFAULT 0,
    claim uuid, leased_until timestamptz, namespace text NOT NULL DEFAULT '')`);
});
after(async () => {
  await pool.end();
  await database.drop();
});

async function reset(): Promise<void> {
  await pool.query(`TRUNCATE ${schema}.items`);
}

/** Marks the batch done, only while the claim is still this one's. */
const finish = (worker: string) => async (rows: Item[], token: string) => {
  await pool.query(`UPDATE ${schema}.items SET done_at = clock_timestamp(), done_by = $3, ${RELEASED} WHERE id = ANY($1) AND claim = $2`, [rows.map((row) => row.id), token, worker]);
};

test('two loops on one table work each due row exactly once, in batches, and leave rows not yet due', async () => {
  await reset();
  await pool.query(`INSERT INTO ${schema}.items (due_at) SELECT now() - interval '1 second' FROM generate_series(1, 500)`);
  await pool.query(`INSERT INTO ${schema}.items (due_at) SELECT now() + interval '1 hour' FROM generate_series(1, 5)`);
  const batches: number[] = [];
  const loops = ['a', 'b'].map((worker) =>
    startWorkLoop<Item>({
      name: worker,
      pool,
      logger,
      table,
      leaseMs: 30_000,
      batchSize: 25,
      concurrency: 100,
      work: async (rows, token) => {
        batches.push(rows.length);
        await finish(worker)(rows, token);
      },
    }),
  );
  try {
    for (let waited = 0; waited < 10_000; waited += 50) {
      const { rows } = await pool.query<{ left: number }>(`SELECT count(*)::int AS left FROM ${schema}.items WHERE done_at IS NULL AND due_at < now()`);
      if (rows[0]?.left === 0) break;
      await sleep(50);
    }
  } finally {
    await Promise.all(loops.map((loop) => loop.stop()));
  }
  const { rows } = await pool.query<{ done: number; claims: number; by_a: number; by_b: number; later: number }>(
    `SELECT count(*) FILTER (WHERE done_at IS NOT NULL)::int AS done, sum(claims)::int AS claims,
            count(*) FILTER (WHERE done_by = 'a')::int AS by_a, count(*) FILTER (WHERE done_by = 'b')::int AS by_b,
            count(*) FILTER (WHERE done_at IS NULL AND claim IS NULL)::int AS later FROM ${schema}.items`,
  );
  assert.deepEqual({ done: rows[0]?.done, claims: rows[0]?.claims, later: rows[0]?.later }, { done: 500, claims: 500, later: 5 });
  assert.equal((rows[0]?.by_a ?? 0) + (rows[0]?.by_b ?? 0), 500);
  assert.ok(batches.every((size) => size >= 1 && size <= 25), `batch sizes ${batches.join(',')}`);
});

test('a row whose worker died is claimed again once its lease ends, and the late worker cannot record it', async () => {
  await reset();
  await pool.query(`INSERT INTO ${schema}.items (due_at) VALUES (now())`);
  // A worker claims it and dies before recording anything.
  const dead = await pool.query<Item & Record<string, unknown>>(claimStatement(table), ['00000000-0000-4000-8000-000000000001', 800, 10]);
  assert.equal(dead.rowCount, 1);
  // What the claim tells the loop's metrics: no earlier claim had lapsed.
  assert.equal(dead.rows[0]?.[LAPSED_COLUMN], false);
  const worked: number[] = [];
  const handed: Array<Record<string, unknown>> = [];
  const loop = startWorkLoop<Item>({
    name: 'survivor',
    pool,
    logger,
    table,
    leaseMs: 30_000,
    pollMs: 100,
    work: async (rows, token) => {
      worked.push(Date.now());
      handed.push(...(rows as unknown as Array<Record<string, unknown>>));
      await finish('survivor')(rows, token);
    },
  });
  const started = Date.now();
  try {
    for (let waited = 0; waited < 5_000 && worked.length === 0; waited += 20) await sleep(20);
  } finally {
    await loop.stop();
  }
  assert.equal(worked.length, 1);
  const first = worked[0] as number;
  assert.ok(first - started >= 600, `claimed again only after the lease (${first - started} ms)`);
  // The dead worker's late write finds its claim gone.
  const late = await pool.query(`UPDATE ${schema}.items SET done_by = 'zombie' WHERE claim = '00000000-0000-4000-8000-000000000001'`);
  assert.equal(late.rowCount, 0);
  const { rows } = await pool.query<{ claims: number; done_by: string }>(`SELECT claims, done_by FROM ${schema}.items`);
  assert.deepEqual(rows, [{ claims: 2, done_by: 'survivor' }]);
  // `work` gets the claim's returning columns only, not what the metrics read.
  assert.deepEqual(Object.keys(handed[0] ?? {}).sort(), ['due_at', 'id']);
});

test('a claim says whether it takes over a lapsed one: the work loop counts those as claims lost', async () => {
  await reset();
  await pool.query(`INSERT INTO ${schema}.items (due_at) VALUES (now())`);
  const claim = (token: string, leaseMs: number) => pool.query<Record<string, unknown>>(claimStatement(table), [token, leaseMs, 10]);
  const first = await claim('00000000-0000-4000-8000-000000000002', 1);
  assert.deepEqual(first.rows.map((row) => row[LAPSED_COLUMN]), [false]);
  // Claimable again once the 1 ms lease has run out.
  let second = await claim('00000000-0000-4000-8000-000000000003', 30_000);
  for (let tries = 0; second.rowCount === 0 && tries < 100; tries += 1) second = await claim('00000000-0000-4000-8000-000000000003', 30_000);
  assert.deepEqual(second.rows.map((row) => row[LAPSED_COLUMN]), [true]);
  // Recorded and released, the row is due again later: a fresh claim of it lapses nothing.
  await pool.query(`UPDATE ${schema}.items SET due_at = now(), ${RELEASED} WHERE claim = '00000000-0000-4000-8000-000000000003'`);
  const third = await claim('00000000-0000-4000-8000-000000000004', 30_000);
  assert.deepEqual(third.rows.map((row) => row[LAPSED_COLUMN]), [false]);
});

/**
 * Until the loop is asleep and listening on `channel`: the LISTEN done, and the loop's connections
 * idle since after it (the wake-up a LISTEN gives has been worked), the same at two looks in a row.
 */
async function untilAsleepListening(channel: string): Promise<void> {
  // Looked at from a pool of its own: a query on the loop's pool would hide the loop's last one.
  const observer = createPool({ url: database.url, schema, max: 1, applicationName: 'workloop-test-observer' });
  try {
    let previous: string | null = null;
    for (let looks = 0; looks < 500; looks += 1) {
      const { rows } = await observer.query<{ quiet: boolean; latest: string | null }>(
        `WITH loop AS (SELECT query, state, state_change FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'workloop-test'),
              listening AS (SELECT max(state_change) AS at FROM loop WHERE query = $1 AND state = 'idle')
         SELECT coalesce((SELECT at FROM listening) < max(state_change) AND bool_and(state = 'idle'), false) AS quiet, max(state_change)::text AS latest
           FROM loop WHERE query <> $1`,
        [`LISTEN ${channel}`],
      );
      const { quiet, latest } = rows[0] ?? { quiet: false, latest: null };
      if (quiet && latest === previous) return;
      previous = quiet ? latest : null;
      await sleep(20);
    }
  } finally {
    await observer.end();
  }
  throw new Error(`the loop is not asleep listening on ${channel} after 500 looks`);
}

/** A loop that sleeps a minute between polls unless `channel` is notified; `worked` gets the time each batch was done. */
const listeningLoop = (name: string, on: Pool, channel: string, worked: number[]) =>
  startWorkLoop<Item>({
    name,
    pool: on,
    logger,
    table,
    leaseMs: 30_000,
    pollMs: 60_000,
    channel,
    work: async (rows, token) => {
      await finish(name)(rows, token);
      worked.push(Date.now());
    },
  });

test('a NOTIFY on the channel wakes an idle loop at once instead of at its next poll', async () => {
  await reset();
  const channel = `${schema}_wake`;
  const worked: number[] = [];
  const loop = listeningLoop('listener', pool, channel, worked);
  try {
    await untilAsleepListening(channel); // for a minute
    const client = await pool.connect();
    const at = Date.now();
    try {
      await client.query('BEGIN');
      await client.query(`INSERT INTO ${schema}.items (due_at) VALUES (now())`);
      await client.query(`NOTIFY ${channel}`);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    for (let waited = 0; waited < 5_000 && worked.length === 0; waited += 10) await sleep(10);
    assert.equal(worked.length, 1);
    assert.ok((worked[0] as number) - at < 1_000, `woken after ${(worked[0] as number) - at} ms`);
  } finally {
    await loop.stop();
  }
});

test('a listening loop keeps its LISTEN outside the pool: on a pool of one connection it still claims and works at once', async () => {
  await reset();
  const channel = `${schema}_own`;
  const applicationName = `workloop-test-${randomBytes(3).toString('hex')}`;
  const small = createPool({ url: database.url, schema, max: 1, applicationName });
  const worked: number[] = [];
  const loop = listeningLoop('one-connection', small, channel, worked);
  try {
    const listening = async () =>
      (await pool.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND query = $2`, [applicationName, `LISTEN ${channel}`])).rowCount === 1;
    for (let waited = 0; waited < 5_000 && !(await listening()); waited += 20) await sleep(20);
    assert.equal(await listening(), true);
    const at = Date.now();
    await pool.query(`WITH added AS (INSERT INTO ${schema}.items (due_at) VALUES (now()) RETURNING id) SELECT pg_notify($1, '') FROM added`, [channel]);
    for (let waited = 0; waited < 5_000 && worked.length === 0; waited += 10) await sleep(10);
    assert.equal(worked.length, 1);
    assert.ok((worked[0] as number) - at < 1_000, `worked after ${(worked[0] as number) - at} ms`);
    // The pool's one connection served the claim; the LISTEN is a connection of its own.
    assert.equal(small.totalCount, 1);
    const { rows } = await pool.query<{ count: number }>(`SELECT count(*)::int AS count FROM pg_stat_activity WHERE application_name = $1`, [applicationName]);
    assert.equal(rows[0]?.count, 2);
  } finally {
    await loop.stop();
    await small.end();
  }
});

test('an idle loop wakes when the next row falls due, not a poll later', async () => {
  await reset();
  await pool.query(`INSERT INTO ${schema}.items (due_at) VALUES (clock_timestamp() + interval '700 milliseconds')`);
  const lateness: number[] = [];
  const loop = startWorkLoop<Item>({
    name: 'timer',
    pool,
    logger,
    table,
    leaseMs: 30_000,
    pollMs: 30_000,
    work: async (rows, token) => {
      for (const row of rows) lateness.push(Date.now() - row.due_at.getTime());
      await finish('timer')(rows, token);
    },
  });
  try {
    for (let waited = 0; waited < 5_000 && lateness.length === 0; waited += 10) await sleep(10);
  } finally {
    await loop.stop();
  }
  assert.equal(lateness.length, 1);
  assert.ok((lateness[0] as number) >= 0 && (lateness[0] as number) < 500, `fired ${lateness[0]} ms late`);
});

test('claim statements refuse what is not a plain, schema-qualified name', () => {
  assert.throws(() => claimStatement({ ...table, table: 'items' }), /items: a work table is schema-qualified/);
  assert.throws(() => claimStatement({ ...table, due: 'due_at; DROP TABLE x' }), /is not a plain column name/);
});
