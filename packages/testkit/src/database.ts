import pg from 'pg';

import { requiredEnv } from './processes.js';

/** A direct connection to the test database, for assertions on stored state and for holding locks. */
export async function connectDatabase(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: requiredEnv('DATABASE_URL') });
  await client.connect();
  return client;
}
