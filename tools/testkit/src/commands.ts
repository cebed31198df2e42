import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import { repoRoot } from './env.js';

const run = promisify(execFile);

/** Runs a command from the repository's root; its whole output goes into the assertion message when it fails. */
export async function passes(file: string, args: string[], env: Record<string, string> = {}, timeoutMs = 300_000): Promise<{ stdout: string; output: string }> {
  try {
    const { stdout, stderr } = await run(file, args, { cwd: repoRoot, env: { ...process.env, ...env }, maxBuffer: 16 * 1024 * 1024, timeout: timeoutMs });
    return { stdout, output: `${stdout}${stderr}` };
  } catch (err) {
    const failed = err as { stdout?: string; stderr?: string; code?: number | string };
    assert.fail(`${file} ${args.join(' ')} failed (${failed.code}):\n${failed.stdout ?? ''}${failed.stderr ?? ''}`);
  }
}
