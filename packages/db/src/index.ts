import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

import type { Logger } from '@herald/logging';
import pg from 'pg';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;
/** Anything that runs a query: the pool or a client inside a transaction. */
export type Queryable = Pick<pg.Pool, 'query'>;

export interface PoolOptions {
  url: string;
  /** The service's own schema; unqualified names in its SQL resolve there. */
  schema: string;
  max?: number;
  applicationName: string;
  /**
   * The Kafka namespace (HERALD_NAMESPACE) of this process, set on every connection as
   * `herald.namespace`: outbox rows record it, so a relay publishes only its own namespace's
   * events even when several namespaces share one database (parallel test stacks).
   */
  namespace?: string;
  /** Told once per outage when connections are lost. */
  logger?: Logger;
}

const schemaPattern = /^[a-z_][a-z0-9_]{0,62}$/;

export function assertSchemaName(schema: string): void {
  if (!schemaPattern.test(schema)) throw new Error(`invalid schema name "${schema}"`);
}

const namespacePattern = /^[A-Za-z0-9._-]*$/;

/**
 * SQL for the namespace of the current connection (see `namespace` above). Work queued in a
 * shared table (outbox rows, retries, webhooks, expiries) records it, and a worker takes only
 * its own namespace's rows.
 */
export const CURRENT_NAMESPACE_SQL = `coalesce(current_setting('herald.namespace', true), '')`;

export function createPool({ url, schema, max = 10, applicationName, namespace = '', logger }: PoolOptions): Pool {
  assertSchemaName(schema);
  if (!namespacePattern.test(namespace)) throw new Error(`invalid namespace "${namespace}"`);
  const pool = new pg.Pool({
    connectionString: url,
    max,
    application_name: applicationName,
    options: `-c search_path=${schema}${namespace ? ` -c herald.namespace=${namespace}` : ''}`,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    // A statement that runs this long is a bug or a lock pile-up; fail it rather than hang.
    statement_timeout: 30_000,
  });
  // A connection the server ends (a restart, a failover) emits 'error' on its client, idle in the
  // pool (the pool re-emits it here) or checked out (a LISTEN connection, a transaction awaiting
  // I/O); unheard, either ends the process. The client is then unusable: its next query fails,
  // whoever holds it releases it, and the pool opens a fresh connection on the next checkout.
  // One warning per outage: warned again only after a connection has been made since.
  let warned = false;
  const onConnectionError = (err: Error): void => {
    if (warned) return;
    warned = true;
    logger?.warn({ err: { message: err.message, code: (err as { code?: string }).code }, schema }, 'PostgreSQL connection lost; reconnecting on demand');
  };
  pool.on('error', onConnectionError);
  pool.on('connect', (client) => {
    client.on('error', onConnectionError);
    if (warned) logger?.info({ schema }, 'PostgreSQL reachable again');
    warned = false;
  });
  return pool;
}

/**
 * A connection of its own, outside the pool but with its settings (schema, namespace, timeouts),
 * for one held as long as the process runs (a LISTEN, the outbox relay's leadership). Taken from
 * the pool instead, each would shrink the pool for queries for good: the decision service held 5
 * of its 10 that way, and answers queued for the other 5. Its errors are reported like the
 * pool's; the caller ends it.
 */
export async function connectDedicated(pool: Pool): Promise<pg.Client> {
  const client = new pg.Client(pool.options);
  client.on('error', (err) => {
    if (pool.listenerCount('error') > 0) pool.emit('error', err, client);
  });
  await client.connect();
  return client;
}

export async function withTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

const migrationFile = /^(\d{3,})_[a-z0-9_]+\.sql$/;

/** A folder of numbered plain-SQL migrations, tracked under its own name in a schema. */
export interface MigrationSource {
  /** e.g. 'service', or 'outbox' for the tables a shared package owns in every service's schema. */
  track: string;
  dir: string;
}

/**
 * Applies the numbered plain-SQL files of each source to `schema`, in order, each file in its own
 * transaction and once per (track, version). An advisory lock per schema lets many replicas (or
 * parallel test files) start at once.
 */
export async function migrate(pool: Pool, schema: string, sources: MigrationSource[], logger?: Logger): Promise<number> {
  assertSchemaName(schema);
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [`herald.migrate.${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${schema}.schema_migrations (
         track text NOT NULL,
         version integer NOT NULL,
         name text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now(),
         PRIMARY KEY (track, version))`,
    );
    const { rows } = await client.query<{ track: string; version: number }>(`SELECT track, version FROM ${schema}.schema_migrations`);
    const applied = new Set(rows.map((row) => `${row.track}/${row.version}`));
    let count = 0;
    for (const { track, dir } of sources) {
      const files = (await readdir(dir)).filter((name) => migrationFile.test(name)).sort();
      for (const name of files) {
        const version = Number(migrationFile.exec(name)?.[1]);
        if (applied.has(`${track}/${version}`)) continue;
        const sql = await readFile(join(dir, name), 'utf8');
        await client.query('BEGIN');
        try {
          await client.query(`SET LOCAL search_path = ${schema}`);
          await client.query(sql);
          await client.query(`INSERT INTO ${schema}.schema_migrations (track, version, name) VALUES ($1, $2, $3)`, [track, version, name]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw new Error(`migration ${schema}/${track}/${name} failed: ${(err as Error).message}`);
        }
        count += 1;
        logger?.info({ schema, track, migration: name }, 'migration applied');
      }
    }
    return count;
  } finally {
    await client.query('SELECT pg_advisory_unlock(hashtext($1))', [`herald.migrate.${schema}`]).catch(() => undefined);
    client.release();
  }
}

export interface Wakeup {
  /** Resolves after `ms`, or at the next wake(); at once if a wake() came since the last sleep. */
  sleep(ms: number): Promise<void>;
  wake(): void;
}

/**
 * The sleep of a loop that polls a table and is woken early (by NOTIFY, a drain, a stop). A wake-up
 * that comes while the loop is busy, e.g. mid-batch, is kept for the next sleep instead of being
 * lost for a whole poll interval.
 */
export function createWakeup(): Wakeup {
  let wakeSleeper: (() => void) | undefined;
  let pending = false;
  return {
    sleep: (ms) =>
      new Promise((resolve) => {
        if (pending) {
          pending = false;
          resolve();
          return;
        }
        const timer = setTimeout(() => {
          wakeSleeper = undefined;
          resolve();
        }, ms);
        wakeSleeper = () => {
          clearTimeout(timer);
          wakeSleeper = undefined;
          resolve();
        };
      }),
    wake() {
      if (wakeSleeper) wakeSleeper();
      else pending = true;
    },
  };
}
export * from './cursor.js';
export * from './admin-cli.js';
