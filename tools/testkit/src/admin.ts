import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import { parseKey } from '@herald/domain';

import { repoRoot, requiredEnv } from './env.js';

const run = promisify(execFile);

/** Bootstraps through the operator CLI, exactly as the README does. */
export async function admin<T = Record<string, string>>(...args: string[]): Promise<T> {
  const { stdout } = await run(process.execPath, ['services/account/dist/src/admin.js', ...args], {
    cwd: repoRoot,
    env: { ...process.env, DATABASE_URL: requiredEnv('DATABASE_URL') },
  });
  return JSON.parse(stdout) as T;
}

export interface TestWorkspace {
  workspaceId: string;
  siteId: string;
  siteSlug: string;
  siteKey: string;
  apiKey: string;
  /** The id of apiKey (its "Default dashboard key"). */
  keyId: string;
}

let counter = 0;

export async function createWorkspace(plan = 'growth', domain = 'example.test'): Promise<TestWorkspace> {
  counter += 1;
  const created = await admin<Omit<TestWorkspace, 'keyId'>>('workspace', 'create', '--name', `Test ${process.pid}-${counter}`, '--plan', plan, '--domain', domain);
  const key = parseKey(created.apiKey);
  if (key.kind !== 'full') throw new Error('workspace create printed no full API key');
  return { ...created, keyId: key.id };
}

export async function createKey(workspaceId: string, origin: string, ...extra: string[]): Promise<{ keyId: string; apiKey: string }> {
  return admin('key', 'create', '--workspace', workspaceId, '--origin', origin, ...extra);
}
