import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { admin, createKey, createWorkspace, freePort, pushSubscription, startStack, type Stack } from '@herald/testkit';
import { renderUnicodeCompact } from 'uqr';

// The compiled `herald` bin as a child process, with a temporary HOME, against a live stack.

const BIN = fileURLToPath(new URL('../src/main.js', import.meta.url));

let stack: Stack;
before(async () => {
  // Keys are checked on every request, so a revoked key is refused at once.
  stack = await startStack({ gatewayEnv: { KEY_CACHE_TTL_MS: '0' } });
});
after(() => stack.stop());

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function herald(home: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [BIN, ...args],
      { env: { PATH: process.env.PATH ?? '', HOME: home, ...env }, timeout: 30_000 },
      (err, stdout, stderr) => resolve({ code: child.exitCode ?? (err ? 1 : 0), stdout, stderr }),
    );
    child.stdin?.end();
  });
}

const newHome = () => mkdtemp(join(tmpdir(), 'herald-cli-'));
const readJson = async (path: string) => JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;
const modeOf = async (path: string) => (await stat(path)).mode & 0o777;

function paths(home: string) {
  return {
    claudeCode: join(home, '.claude.json'),
    claudeDesktop: join(home, '.config', 'Claude', 'claude_desktop_config.json'),
    cursor: join(home, '.cursor', 'mcp.json'),
    vscode: join(home, '.config', 'Code', 'User', 'mcp.json'),
  };
}

async function backupsOf(path: string): Promise<string[]> {
  const directory = join(path, '..');
  const name = path.slice(directory.length + 1);
  return (await readdir(directory)).filter((file) => file.startsWith(`${name}.herald-backup-`)).sort();
}

async function runtimeKey() {
  const workspace = await createWorkspace();
  const key = await createKey(workspace.workspaceId, 'runtime', '--name', 'cli test');
  return { workspace, ...key };
}

test('setup writes each client configuration, keeps other servers, backs up, and is idempotent', async () => {
  const home = await newHome();
  const files = paths(home);
  const { apiKey, keyId } = await runtimeKey();
  const endpoint = `${stack.gatewayUrl}/api/mcp/mcp`;
  const authorization = `Bearer ${apiKey}`;
  // Claude Code's file already holds another server and unrelated settings.
  const original = { numStartups: 3, mcpServers: { other: { type: 'stdio', command: 'other-server', args: [] } } };
  await writeFile(files.claudeCode, JSON.stringify(original));

  const first = await herald(home, ['setup', '--key', apiKey, '--url', `${stack.gatewayUrl}/`]);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, new RegExp(`^Key pk_${keyId} \\(runtime\\) works: workspace "Test [^"]+", plan growth\\.$`, 'm'));
  assert.match(first.stdout, /^Claude Code: wrote ~\/\.claude\.json \(previous file kept as ~\/\.claude\.json\.herald-backup-\d{8}T\d{9}Z\)\.$/m);
  assert.match(first.stdout, /^Cursor: wrote ~\/\.cursor\/mcp\.json\.$/m);
  assert.doesNotMatch(first.stdout + first.stderr, new RegExp(apiKey.split('.')[1] ?? 'never'), 'the secret is never printed');

  assert.deepEqual(await readJson(files.claudeCode), {
    numStartups: 3,
    mcpServers: {
      other: original.mcpServers.other,
      herald: { type: 'http', url: endpoint, headers: { Authorization: authorization } },
    },
  });
  assert.deepEqual(await readJson(files.cursor), { mcpServers: { herald: { url: endpoint, headers: { Authorization: authorization } } } });
  assert.deepEqual(await readJson(files.vscode), { servers: { herald: { type: 'http', url: endpoint, headers: { Authorization: authorization } } } });
  assert.deepEqual(await readJson(files.claudeDesktop), {
    mcpServers: {
      herald: {
        command: 'npx',
        args: ['-y', 'mcp-remote', endpoint, '--header', 'Authorization:${HERALD_AUTHORIZATION}'],
        env: { HERALD_AUTHORIZATION: authorization },
      },
    },
  });
  for (const path of Object.values(files)) assert.equal(await modeOf(path), 0o600, path);

  // Only the file that existed was backed up, byte for byte.
  const backups = await backupsOf(files.claudeCode);
  assert.equal(backups.length, 1);
  assert.equal(await readFile(join(home, backups[0] ?? ''), 'utf8'), JSON.stringify(original));
  assert.equal(await modeOf(join(home, backups[0] ?? '')), 0o600);
  assert.deepEqual(await backupsOf(files.cursor), []);

  // A second run changes nothing and backs nothing up.
  const contents = await Promise.all(Object.values(files).map((path) => readFile(path, 'utf8')));
  const second = await herald(home, ['setup', '--key', apiKey, '--url', stack.gatewayUrl]);
  assert.equal(second.code, 0, second.stderr);
  assert.match(second.stdout, /^Claude Code: ~\/\.claude\.json already up to date\.$/m);
  assert.deepEqual(await Promise.all(Object.values(files).map((path) => readFile(path, 'utf8'))), contents);
  assert.equal((await backupsOf(files.claudeCode)).length, 1);

  // Another key (here from HERALD_API_KEY) replaces the entry, keeping a backup of each file.
  const next = await runtimeKey();
  const third = await herald(home, ['setup', '--url', stack.gatewayUrl, '--client', 'cursor'], { HERALD_API_KEY: next.apiKey });
  assert.equal(third.code, 0, third.stderr);
  assert.deepEqual(await readJson(files.cursor), { mcpServers: { herald: { url: endpoint, headers: { Authorization: `Bearer ${next.apiKey}` } } } });
  assert.equal((await backupsOf(files.cursor)).length, 1);
  assert.equal((await backupsOf(files.claudeCode)).length, 1, 'clients not named are left alone');
});

test('setup refuses without writing: no key, a malformed key, a rejected key, an unreachable server, a broken file', async () => {
  const home = await newHome();
  const files = paths(home);

  const noKey = await herald(home, ['setup', '--url', stack.gatewayUrl]);
  assert.equal(noKey.code, 2);
  assert.match(noKey.stderr, /^No API key: pass --key, set HERALD_API_KEY, or run setup in a terminal to be asked for it\./);

  const siteKey = await herald(home, ['setup', '--key', 'pk_abcdefghijklmnop']);
  assert.equal(siteKey.code, 2);
  assert.match(siteKey.stderr, /not a full API key/);

  const { apiKey, keyId } = await runtimeKey();
  await admin('key', 'revoke', '--key', keyId);
  const revoked = await herald(home, ['setup', '--key', apiKey, '--url', stack.gatewayUrl]);
  assert.equal(revoked.code, 4);
  assert.match(revoked.stderr, /refused the key \(401 unauthorized: .+\)\. Nothing was changed\./);

  const live = await runtimeKey();
  const closed = `http://127.0.0.1:${await freePort()}`;
  const unreachable = await herald(home, ['setup', '--key', live.apiKey, '--url', closed]);
  assert.equal(unreachable.code, 5);
  assert.equal(unreachable.stderr, `Herald at ${closed} could not be reached (ECONNREFUSED). Is the server running, and is the URL right? Nothing was changed.\n`);
  for (const path of Object.values(files)) await assert.rejects(stat(path), { code: 'ENOENT' });

  // A file that is not JSON is never overwritten; the others are still set up.
  await mkdir(join(home, '.cursor'));
  await writeFile(files.cursor, '{ "mcpServers": { // a comment\n');
  const broken = await herald(home, ['setup', '--key', live.apiKey, '--url', stack.gatewayUrl]);
  assert.equal(broken.code, 1);
  assert.match(broken.stderr, /^Cursor: not changed: .*\.cursor\/mcp\.json is not valid JSON/m);
  assert.equal(await readFile(files.cursor, 'utf8'), '{ "mcpServers": { // a comment\n');
  assert.ok((await readJson(files.claudeCode)).mcpServers);

  const usage = await herald(home, ['setup', '--bogus']);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /Usage:/);
});

test('status --json: 3 not set up, 0 ready, 4 key rejected, 5 unreachable', async () => {
  const home = await newHome();
  const files = paths(home);
  const status = async () => {
    const run = await herald(home, ['status', '--json']);
    return { code: run.code, body: JSON.parse(run.stdout) as { state: string; exitCode: number; message: string; clients: Array<Record<string, unknown>> } };
  };

  const fresh = await status();
  assert.equal(fresh.code, 3);
  assert.equal(fresh.body.state, 'not_set_up');
  assert.deepEqual(
    fresh.body.clients.map((client) => [client.id, client.configured]),
    [
      ['claude-code', false],
      ['claude-desktop', false],
      ['cursor', false],
      ['vscode', false],
    ],
  );

  const { apiKey, keyId, workspace } = await runtimeKey();
  assert.equal((await herald(home, ['setup', '--key', apiKey, '--url', stack.gatewayUrl])).code, 0);
  const ready = await status();
  assert.equal(ready.code, 0);
  assert.deepEqual(ready.body.clients[0], {
    id: 'claude-code',
    name: 'Claude Code',
    path: files.claudeCode,
    configured: true,
    url: `${stack.gatewayUrl}/api/mcp/mcp`,
    keyId: `pk_${keyId}`,
    state: 'ready',
    workspace: ready.body.clients[0]?.workspace,
    plan: 'growth',
  });
  assert.deepEqual({ ...ready.body, clients: [] }, { state: 'ready', exitCode: 0, message: 'Herald is set up and its key works.', clients: [] });
  assert.equal((await herald(home, ['status'])).stdout, 'Herald is set up and its key works.\n');

  await admin('key', 'revoke', '--key', keyId, '--workspace', workspace.workspaceId);
  const rejected = await status();
  assert.equal(rejected.code, 4);
  assert.equal(rejected.body.state, 'key_rejected');
  assert.ok(rejected.body.clients.every((client) => client.state === 'key_rejected'));

  // The server moved away: every configured client points at a closed port.
  const closed = `http://127.0.0.1:${await freePort()}`;
  for (const path of Object.values(files)) {
    await writeFile(path, (await readFile(path, 'utf8')).replaceAll(stack.gatewayUrl, closed));
  }
  const unreachable = await status();
  assert.equal(unreachable.code, 5);
  assert.equal(unreachable.body.state, 'unreachable');
  assert.equal(unreachable.body.message, 'Herald is set up, but the server cannot be reached.');
});

test('doctor explains in sentences', async () => {
  const home = await newHome();
  const files = paths(home);
  const fresh = await herald(home, ['doctor']);
  assert.equal(fresh.code, 3);
  assert.equal(
    fresh.stdout,
    [
      `Claude Code (~/.claude.json): no Herald server configured; \`herald setup\` adds one.`,
      `Claude Desktop (~/.config/Claude/claude_desktop_config.json): no Herald server configured; \`herald setup\` adds one.`,
      `Cursor (~/.cursor/mcp.json): no Herald server configured; \`herald setup\` adds one.`,
      `VS Code (~/.config/Code/User/mcp.json): no Herald server configured; \`herald setup\` adds one.`,
      'Herald is not set up for any agent client; run `herald setup`.',
      '',
    ].join('\n'),
  );

  const { apiKey, keyId } = await runtimeKey();
  assert.equal((await herald(home, ['setup', '--key', apiKey, '--url', stack.gatewayUrl, '--client', 'claude-code', '--client', 'cursor'])).code, 0);
  const ready = await herald(home, ['doctor']);
  assert.equal(ready.code, 0);
  const readyLines = ready.stdout.trimEnd().split('\n');
  assert.match(readyLines[0] ?? '', new RegExp(`^Claude Code \\(~/\\.claude\\.json\\): ready\\. Key pk_${keyId} \\(runtime\\) works for workspace "Test [^"]+" on the growth plan at ${stack.gatewayUrl}\\.$`));
  assert.equal(readyLines[1], 'Claude Desktop (~/.config/Claude/claude_desktop_config.json): no Herald server configured; `herald setup` adds one.');
  assert.deepEqual(readyLines.slice(-2), ['Herald is set up and its key works.', 'No problems found.']);

  // A file others may read, and a revoked key.
  await chmod(files.cursor, 0o644);
  await admin('key', 'revoke', '--key', keyId);
  const broken = await herald(home, ['doctor']);
  assert.equal(broken.code, 4);
  const lines = broken.stdout.trimEnd().split('\n');
  assert.match(
    lines[0] ?? '',
    new RegExp(`^Claude Code \\(~/\\.claude\\.json\\): ${stack.gatewayUrl} refused the key \\(401 unauthorized: .+\\)\\. Create a new key \\(or fix the workspace plan\\) and run \`herald setup --key <new key>\`\\.$`),
  );
  assert.ok(lines.includes(`  ~/.cursor/mcp.json holds your key but other users may read it (mode 644); run \`chmod 600 ${files.cursor}\`.`), broken.stdout);
  assert.deepEqual(lines.slice(-2), ['Herald is set up, but the server refuses the key.', '3 problems found.']);
});

test('pair prints a single-use pairing link, its QR code and expiry; the link makes the browser the owner\'s approver device', async () => {
  const home = await newHome();
  const { apiKey, keyId } = await runtimeKey();

  const none = await herald(home, ['pair']);
  assert.deepEqual([none.code, none.stderr], [3, 'No API key: pass --key, set HERALD_API_KEY, or run `herald setup` first.\n']);

  // With the key setup configured, nothing else is needed.
  assert.equal((await herald(home, ['setup', '--key', apiKey, '--url', stack.gatewayUrl, '--client', 'cursor'])).code, 0);
  const paired = await herald(home, ['pair']);
  assert.equal(paired.code, 0, paired.stderr);
  const lines = paired.stdout.split('\n');
  assert.equal(lines[0], 'Open this link on the device that should receive your questions (it works once):');
  const link = lines[2] ?? '';
  const token = /^http:\/\/localhost:8080\/enroll\/([A-Za-z0-9_-]{43})$/.exec(link)?.[1];
  assert.ok(token, paired.stdout);
  // The code printed is the link's (uqr's compact Unicode rendering, two modules of quiet zone).
  assert.ok(paired.stdout.includes(`\n\n${renderUnicodeCompact(link, { border: 2 })}\n\n`), paired.stdout);
  assert.match(lines.at(-2) ?? '', /^Scan the code with the phone's camera, open the page and allow notifications\. The link expires at \S+Z \(in about 15 minutes\)\.$/);
  assert.doesNotMatch(paired.stdout + paired.stderr, new RegExp(apiKey.split('.')[1] ?? 'never'), 'the secret is never printed');

  const used = await fetch(`${stack.gatewayUrl}/api/v1/enroll/${token}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(pushSubscription('https://fcm.googleapis.com/fcm/send')),
  });
  assert.equal(used.status, 201);
  const reachability = await fetch(`${stack.gatewayUrl}/api/v1/server/reachability`, { headers: { authorization: `Bearer ${apiKey}` } });
  assert.deepEqual(await reachability.json(), { externalId: 'owner', reachable: true, browserSubscriptions: 1, nativeAppDevices: 0, channels: ['browser'] });
  assert.equal((await fetch(`${stack.gatewayUrl}/api/v1/enroll/${token}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(pushSubscription('https://fcm.googleapis.com/fcm/send')) })).status, 409);

  // Another person's device, with the key in the environment.
  const other = await herald(await newHome(), ['pair', '--external-id', 'user-5'], { HERALD_API_KEY: apiKey, HERALD_URL: stack.gatewayUrl });
  assert.equal(other.code, 0, other.stderr);
  assert.equal(other.stdout.split('\n')[0], "Open this link on the device that should receive user-5's questions (it works once):");

  // A rejected key (4) and an unreachable server (5) print one sentence and no link.
  await admin('key', 'revoke', '--key', keyId);
  const rejected = await herald(home, ['pair']);
  assert.equal(rejected.code, 4);
  assert.match(rejected.stderr, new RegExp(`^${stack.gatewayUrl} refused the key \\(401 unauthorized: .+\\)\\.\\n$`));
  assert.equal(rejected.stdout, '');
  const unreachable = await herald(home, ['pair', '--key', apiKey, '--url', `http://127.0.0.1:${await freePort()}`]);
  assert.equal(unreachable.code, 5);
  assert.match(unreachable.stderr, /could not be reached \(ECONNREFUSED\)/);
});
