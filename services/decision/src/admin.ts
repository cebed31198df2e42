#!/usr/bin/env node
/**
 * Operator commands of the decision service: `npm run admin:decision -- <command>`; prints one JSON
 * document on stdout.
 *
 *   chain verify --question <id>
 *       -> {questionId, entries, intact: true, head}       exit 0: every entry's hash holds
 *       -> {questionId, entries, intact: false, brokenAt, problem}   exit 3: the first seq whose
 *          prev_hash or hash does not match (an entry changed, removed or inserted after the fact)
 *
 * Reads DATABASE_URL; reads the decision schema only (applies no migrations: it verifies what the
 * service wrote). Usage errors exit 2, an unknown question exits 1 with a JSON error on stderr.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { createPool, runAdminCli, UsageError, type Pool } from '@herald/db';
import { questionEventHash } from '@herald/domain';
import { HeraldError } from '@herald/errors';

import * as store from './store.js';

const usage = `usage:
  chain verify --question <id>`;

/** Exit code of a chain that does not verify. */
export const BROKEN_CHAIN_EXIT = 3;

/** Where a question's chain first fails to verify; undefined when every entry holds. */
export function firstBreak(questionId: string, entries: readonly store.QuestionEventRow[]): { seq: number; problem: string } | undefined {
  let prevHash = '';
  for (const [index, entry] of entries.entries()) {
    const seq = index + 1;
    if (entry.seq !== seq) return { seq, problem: 'missing' };
    if (entry.prev_hash !== prevHash) return { seq, problem: 'prevHash is not the hash of the entry before' };
    const hash = questionEventHash(prevHash, { questionId, seq, kind: entry.kind, at: entry.at.toISOString(), actor: entry.actor, detail: entry.detail });
    if (entry.hash !== hash) return { seq, problem: 'hash does not match the entry' };
    prevHash = hash;
  }
  return undefined;
}

/** Runs one command against `pool`: what the CLI prints, and whether it reports a failure. */
export async function runDecisionAdmin(pool: Pool, argv: string[]): Promise<{ result: Record<string, unknown>; ok: boolean }> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { question: { type: 'string' } }, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const command = parsed.positionals.join(' ');
  if (command !== 'chain verify') throw new UsageError(command === '' ? 'a command is required' : `unknown command "${command}"`);
  const questionId = parsed.values.question;
  if (!questionId) throw new UsageError('--question is required');
  if (!(await store.findQuestion(pool, questionId, {}))) throw new HeraldError('not_found', `No question ${questionId}.`);
  const entries = await store.listEvents(pool, questionId, 0, null);
  const broken = firstBreak(questionId, entries);
  if (broken) return { result: { questionId, entries: entries.length, intact: false, brokenAt: broken.seq, problem: broken.problem }, ok: false };
  return { result: { questionId, entries: entries.length, intact: true, head: entries.at(-1)?.hash ?? '' }, ok: true };
}

const main = () =>
  runAdminCli(usage, async (databaseUrl) => {
    const pool = createPool({ url: databaseUrl, schema: store.SCHEMA, max: 1, applicationName: 'herald-decision-admin' });
    return {
      async run(argv) {
        const { result, ok } = await runDecisionAdmin(pool, argv);
        return { result, exitCode: ok ? 0 : BROKEN_CHAIN_EXIT };
      },
      close: () => pool.end(),
    };
  });

if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
