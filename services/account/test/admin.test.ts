import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';

import { admin, createWorkspace, repoRoot, requiredEnv } from '@herald/testkit';

// The operator CLI: its output, its errors and exit codes.

const run = promisify(execFile);

async function cli(args: string[], env: Record<string, string | undefined> = {}) {
  try {
    const { stdout, stderr } = await run(process.execPath, ['services/account/dist/src/admin.js', ...args], {
      cwd: repoRoot,
      env: { ...process.env, DATABASE_URL: requiredEnv('DATABASE_URL'), ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const failure = err as { code: number; stdout: string; stderr: string };
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
  }
}

test('npm run admin -- workspace create prints the new workspace, its site and a dashboard key', async () => {
  const { stdout } = await run('npm', ['run', '--silent', 'admin', '--', 'workspace', 'create', '--name', 'CLI Test', '--plan', 'starter', '--domain', 'cli.example'], {
    cwd: repoRoot,
    env: { ...process.env, DATABASE_URL: requiredEnv('DATABASE_URL') },
  });
  const created = JSON.parse(stdout) as Record<string, string>;
  assert.deepEqual(Object.keys(created).sort(), ['apiKey', 'siteId', 'siteKey', 'siteSlug', 'workspaceId']);
  assert.match(created.workspaceId ?? '', /^ws_[a-z2-7]{16}$/);
  assert.match(created.siteId ?? '', /^site_[a-z2-7]{16}$/);
  assert.match(created.siteSlug ?? '', /^cli-test-[a-z2-7]{6}$/);
  assert.match(created.siteKey ?? '', /^pk_[a-z2-7]{16}$/);
  assert.match(created.apiKey ?? '', /^pk_[a-z2-7]{16}\.[A-Za-z0-9_-]{43}$/);
});

test('key create and key revoke', async () => {
  const workspace = await createWorkspace('enterprise');
  const key = await admin<{ keyId: string; apiKey: string }>('key', 'create', '--workspace', workspace.workspaceId, '--origin', 'runtime', '--name', 'ci runner');
  assert.match(key.apiKey, new RegExp(`^pk_${key.keyId}\\.[A-Za-z0-9_-]{43}$`));
  assert.deepEqual(await admin('key', 'revoke', '--key', key.keyId, '--workspace', workspace.workspaceId), { keyId: key.keyId, revoked: true });
  const again = await cli(['key', 'revoke', '--key', key.keyId]);
  assert.equal(again.code, 1);
  assert.deepEqual(JSON.parse(again.stderr), { error: `No active key ${key.keyId}.`, code: 'not_found' });
});

test('usage errors exit 2 with the usage text; failures exit 1 with a JSON error', async () => {
  const cases: Array<[string[], number, Record<string, string>]> = [
    [[], 2, { error: 'a command is required' }],
    [['workspace', 'delete'], 2, { error: 'unknown command "workspace delete"' }],
    [['workspace', 'create', '--name', 'x', '--plan', 'gold', '--domain', 'x.test'], 2, {
      error: '--plan must be one of none, free, starter, growth, enterprise, partner',
    }],
    [['workspace', 'create', '--plan', 'free', '--domain', 'x.test'], 2, { error: '--name is required' }],
    [['key', 'create', '--workspace', 'ws_x', '--origin', 'bound'], 2, { error: '--external-id is required' }],
    [['key', 'create', '--workspace', 'ws_x', '--origin', 'runtime', '--external-id', 'u'], 2, { error: '--external-id goes with --origin bound' }],
    [['key', 'create', '--workspace', 'ws_missing', '--origin', 'runtime'], 1, { error: 'No workspace ws_missing.', code: 'not_found' }],
    [['workspace', 'set-plan', '--workspace', 'ws_missing', '--plan', 'free'], 1, { error: 'No workspace ws_missing.', code: 'not_found' }],
    [['workspace', 'create', '--name', 'x', '--plan', 'free', '--domain', 'not a domain'], 1, {
      error: '"not a domain" is not a domain name (e.g. example.com or localhost:3000).',
      code: 'invalid_request',
    }],
  ];
  for (const [args, code, error] of cases) {
    const result = await cli(args);
    assert.equal(result.code, code, args.join(' '));
    assert.deepEqual(JSON.parse(result.stderr.split('\n')[0] ?? ''), error, args.join(' '));
    if (code === 2) assert.match(result.stderr, /usage:/);
    assert.equal(result.stdout, '');
  }
});

test('without DATABASE_URL the CLI stops with exit 78 naming it', async () => {
  const result = await cli(['workspace', 'create'], { DATABASE_URL: '' });
  assert.equal(result.code, 78);
  assert.match(result.stderr, /DATABASE_URL is required/);
});
