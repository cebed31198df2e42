#!/usr/bin/env node
// npm run load -- <journey> [--smoke] [--stack] [--remote] [--summary-dir <dir>]
//
// Runs one journey of loadtest/scenarios/ against HERALD_URL (default the gateway `npm start`
// serves, http://127.0.0.1:8080). Starts nothing unless --stack is given: then a local stack
// (every service, one gateway, a local push peer with a key pool) on free ports, stopped at the
// end. setup() bootstraps workspaces and keys through the admin CLI, which needs the DATABASE_URL
// of the Herald under load (taken from `deploy/infra.sh env` for a local one when unset).
// Exit code: 0 every threshold held, 99 a threshold crossed, 1 an error, 2 a usage error.
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';

import { repoRoot, type SendingHarness } from '@herald/testkit';

import { startLoadStack } from './runner/local-stack.js';
import type { RunEnv } from './runner/scenario.js';
import { JOURNEYS } from './scenarios/index.js';

const USAGE = `usage: npm run load -- <journey> [--smoke] [--stack] [--remote] [--summary-dir <dir>]
${Object.entries(JOURNEYS)
  .map(([name, journey]) => `  ${name.padEnd(10)} ${journey.description}`)
  .join('\n')}
  --smoke          the few-second form the test suite runs (default: the full form)
  --stack          start a local Herald (and a push peer) for this run instead of using HERALD_URL
  --remote         allow a HERALD_URL that is not on this machine (never in tests)
  --summary-dir    where the JSON and text summaries go (default loadtest/results, or LOAD_SUMMARY_DIR)
environment: HERALD_URL (default http://127.0.0.1:8080), DATABASE_URL (for the admin CLI),
  PUSH_PEER_URL and PUSH_PEER_CA_FILE (a local push peer with a key pool, for subscriber endpoints that accept pushes),
  ENGAGEMENT_TOKEN_SECRET (the target's, for the engagement journey's report tokens)`;

const DEFAULT_URL = 'http://127.0.0.1:8080';
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

function usage(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`);
  process.exit(2);
}

const run = promisify(execFile);

/**
 * The local infrastructure's variables (what is unset, from `deploy/infra.sh env`). Starts
 * nothing: with `required`, infrastructure that is not running is an error naming the command.
 */
async function localInfrastructure(names: readonly string[], required: boolean): Promise<void> {
  if (names.every((name) => process.env[name])) return;
  if (required) {
    await run('bash', ['deploy/infra.sh', 'status'], { cwd: repoRoot }).catch(() => {
      throw new Error('the local infrastructure is not running: start it with "npm run infra -- up" (or set DATABASE_URL, REDIS_URL and KAFKA_BROKERS)');
    });
  }
  const { stdout } = await run('bash', ['deploy/infra.sh', 'env'], { cwd: repoRoot });
  for (const [, name, value] of stdout.matchAll(/^export (\w+)=(.*)$/gm)) {
    if (name !== undefined && value !== undefined && names.includes(name)) process.env[name] ??= value;
  }
}

/** Every service and a gateway on free ports, with a push peer whose pool endpoints all exist. */
async function startLocalStack(): Promise<SendingHarness> {
  await localInfrastructure(['DATABASE_URL', 'REDIS_URL', 'KAFKA_BROKERS'], true);
  return startLoadStack();
}

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      allowPositionals: true,
      options: { smoke: { type: 'boolean' }, stack: { type: 'boolean' }, remote: { type: 'boolean' }, 'summary-dir': { type: 'string' }, help: { type: 'boolean' } },
    });
  } catch (err) {
    usage(err instanceof Error ? err.message : String(err));
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const [name, ...rest] = positionals;
  if (name === undefined || rest.length > 0) usage('name one journey');
  const journey = JOURNEYS[name];
  if (!journey) usage(`no journey "${name}"`);

  let harness: SendingHarness | undefined;
  const env: Record<string, string | undefined> = { ...process.env };
  if (values.stack) {
    process.stderr.write('starting a local Herald (--stack)...\n');
    harness = await startLocalStack();
    // Ctrl-C or SIGTERM mid-run still stops what --stack started.
    const started = harness;
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => void started.stop().finally(() => process.exit(130)));
    }
    env.HERALD_URL = harness.stack.gatewayUrl;
    env.PUSH_PEER_URL = harness.peer.origin;
    env.ENGAGEMENT_TOKEN_SECRET = harness.stack.engagementTokenSecret;
    env.PUSH_PEER_CA_FILE = join(await mkdtemp(join(tmpdir(), 'herald-load-')), 'peer-ca.pem');
    await writeFile(env.PUSH_PEER_CA_FILE, harness.peer.ca ?? '');
  }
  try {
    const baseUrl = (env.HERALD_URL ?? DEFAULT_URL).replace(/\/+$/, '');
    const host = new URL(baseUrl).hostname;
    if (!LOOPBACK.has(host) && !values.remote) usage(`HERALD_URL ${baseUrl} is not on this machine: pass --remote to load it on purpose`);
    if (LOOPBACK.has(host)) await localInfrastructure(['DATABASE_URL'], false);
    const runEnv: RunEnv = {
      baseUrl,
      form: values.smoke ? 'smoke' : 'full',
      summaryDir: values['summary-dir'] ?? env.LOAD_SUMMARY_DIR ?? join(repoRoot, 'loadtest', 'results'),
      env,
    };
    process.stderr.write(`journey ${name} (${runEnv.form}) against ${baseUrl}\n`);
    const { written, exitCode, summary } = await journey.run(runEnv);
    process.stderr.write(`summary written to ${written.join(' and ')}\n`);
    if (!summary.ok) process.stderr.write(`thresholds crossed: ${summary.thresholds.filter((result) => !result.ok).map((result) => `${result.key} ${result.expression}`).join('; ')}\n`);
    return exitCode;
  } finally {
    await harness?.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`load run failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
