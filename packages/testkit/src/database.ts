import { randomBytes } from 'node:crypto';

import pg from 'pg';

import { requiredEnv } from './processes.js';

/** A direct connection to the test database (or `url`), for assertions on stored state and for holding locks. */
export async function connectDatabase(url = requiredEnv('DATABASE_URL')): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

export interface TestDatabase {
  /** DATABASE_URL of the new database. */
  url: string;
  drop(): Promise<void>;
}

/**
 * A fresh, empty database beside the test database. For processes whose background work must not
 * meet other test files' processes: an outbox relay, for one, leads its schema per database.
 */
export async function createDatabase(): Promise<TestDatabase> {
  const name = `herald_t_${randomBytes(5).toString('hex')}`;
  const admin = await connectDatabase();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(requiredEnv('DATABASE_URL'));
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const dropper = await connectDatabase();
      try {
        await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await dropper.end();
      }
    },
  };
}
