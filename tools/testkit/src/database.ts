import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

import pg from 'pg';

import { requiredEnv } from './env.js';

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

/** Moves a question's (an ask's or a decision's) expiry into the past, as if its lifetime had run out. */
export async function expireQuestion(questionId: string): Promise<void> {
  const db = await connectDatabase();
  try {
    await db.query(`UPDATE decision.questions SET expires_at = now() - interval '1 second', created_at = now() - interval '2 seconds' WHERE id = $1`, [questionId]);
  } finally {
    await db.end();
  }
}

/** The id of the workspace's newest pending question of a kind, once it exists (for a call still waiting on it). */
export async function pendingQuestionId(workspaceId: string, kind: 'ask' | 'decision'): Promise<string> {
  const db = await connectDatabase();
  try {
    for (;;) {
      const { rows } = await db.query<{ id: string }>(
        `SELECT id FROM decision.questions WHERE workspace_id = $1 AND kind = $2 AND status = 'pending' ORDER BY created_at DESC LIMIT 1`,
        [workspaceId, kind],
      );
      if (rows[0]) return rows[0].id;
      await sleep(20);
    }
  } finally {
    await db.end();
  }
}
