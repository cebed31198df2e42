#!/usr/bin/env node
// npm run load -- <journey | script.ts> [--smoke] [--stack] [--remote] [--provision <file>] [--summary-dir <dir>] [-e KEY=VALUE]...
// npm run load -- provision [--out <file>] [--hold]
// npm run load -- retire --provision <file>
//
// Runs a k6 script of loadtest/k6/ (a journey's name, or a path) on Herald's k6-compatible runtime
// (runtime/) against HERALD_URL (default the gateway `npm start` serves, http://127.0.0.1:8080).
// Starts nothing unless --stack is given: then a local stack (every service, one gateway, a local
// push peer with a key pool) on free ports, stopped at the end. Without --provision the run
// provisions its own workspaces (operator CLI; DATABASE_URL of the Herald under load, taken from
// `deploy/infra.sh env` for a local one when unset) and retires them at the end.
// Exit code: 0 every threshold held, 99 a threshold crossed, 1 an error, 2 a usage error.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';

import { repoRoot, requiredEnv, type SendingHarness } from '@herald/testkit';

import { JOURNEY_NAMES, type Provision } from './k6/lib/provision-file.js';
import { provision, retire, type PushPeer } from './provision.js';
import { startLoadStack } from './runner/local-stack.js';
import type { RunEnv } from './runner/scenario.js';
import { runScript } from './runtime/host.js';
import { RUNTIME_LABEL } from './runtime/protocol.js';

const USAGE = `usage: npm run load -- <journey | path/to/script.ts> [--smoke] [--stack] [--remote] [--provision <file>] [--summary-dir <dir>] [-e KEY=VALUE]...
       npm run load -- provision [--out <file>] [--hold]
       npm run load -- retire --provision <file>
Runs a k6 script on ${RUNTIME_LABEL}.
journeys (loadtest/k6/<journey>.ts): ${JOURNEY_NAMES.join(', ')}
  --smoke          the few-second form the test suite runs (HERALD_SMOKE=1; default: the full form)
  --stack          start a local Herald (and a push peer) for this run instead of using HERALD_URL
  --remote         allow a HERALD_URL that is not on this machine (never in tests)
  --provision      the file \`provision\` wrote (default: provision for this run, retire after it)
  --summary-dir    where handleSummary writes (HERALD_SUMMARY_DIR; default loadtest/results, or LOAD_SUMMARY_DIR)
  -e KEY=VALUE     one more __ENV variable, as k6 run -e
  --out            where provision writes (default loadtest/results/provision.json)
  --hold           provision stays up until SIGTERM, then retires what it made (the chart's sidecar)
environment: HERALD_URL (default http://127.0.0.1:8080), DATABASE_URL (for the operator CLI),
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

function pushPeer(env: Readonly<Record<string, string | undefined>>): PushPeer | undefined {
  return env.PUSH_PEER_URL ? { origin: env.PUSH_PEER_URL, caFile: env.PUSH_PEER_CA_FILE } : undefined;
}

async function writeProvision(path: string, provisioned: Provision): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  // API keys: readable by this user only.
  await writeFile(path, `${JSON.stringify(provisioned, null, 2)}\n`, { mode: 0o600 });
}

function scriptOf(name: string): string {
  if ((JOURNEY_NAMES as readonly string[]).includes(name)) return join(repoRoot, 'loadtest', 'k6', `${name}.ts`);
  const path = resolve(name);
  if (/\.[jt]s$/.test(path) && existsSync(path)) return path;
  return usage(`no journey or script "${name}"`);
}

function variables(pairs: readonly string[]): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const pair of pairs) {
    const equals = pair.indexOf('=');
    if (equals < 1) usage(`-e ${pair} is not KEY=VALUE`);
    vars[pair.slice(0, equals)] = pair.slice(equals + 1);
  }
  return vars;
}

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      allowPositionals: true,
      options: {
        smoke: { type: 'boolean' },
        stack: { type: 'boolean' },
        remote: { type: 'boolean' },
        provision: { type: 'string' },
        out: { type: 'string' },
        hold: { type: 'boolean' },
        'summary-dir': { type: 'string' },
        env: { type: 'string', short: 'e', multiple: true },
        help: { type: 'boolean' },
      },
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
  if (name === undefined || rest.length > 0) usage('name one journey or script');

  if (name === 'provision') {
    await localInfrastructure(['DATABASE_URL'], false);
    const out = resolve(values.out ?? join(repoRoot, 'loadtest', 'results', 'provision.json'));
    const provisioned = await provision(requiredEnv('DATABASE_URL'), pushPeer(process.env));
    await writeProvision(out, provisioned);
    process.stdout.write(`${out}\n`);
    if (values.hold) {
      // The chart's sidecar: held until SIGTERM (k6 is done), then the workspaces are retired.
      await new Promise<void>((resolveSignal) => ['SIGTERM', 'SIGINT'].forEach((signal) => process.once(signal, () => resolveSignal())));
      await retire(requiredEnv('DATABASE_URL'), provisioned);
      process.stderr.write(`retired ${provisioned.workspaces.length} workspaces\n`);
    }
    return 0;
  }
  if (name === 'retire') {
    if (!values.provision) usage('retire needs --provision <file>');
    await localInfrastructure(['DATABASE_URL'], false);
    await retire(requiredEnv('DATABASE_URL'), JSON.parse(await readFile(values.provision, 'utf8')) as Provision);
    return 0;
  }

  const script = scriptOf(name);
  const vars = variables(values.env ?? []);
  let harness: SendingHarness | undefined;
  const env: Record<string, string | undefined> = { ...process.env };
  if (values.stack) {
    process.stderr.write('starting a local Herald (--stack)...\n');
    await localInfrastructure(['DATABASE_URL', 'REDIS_URL', 'KAFKA_BROKERS'], true);
    harness = await startLoadStack();
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
  let provisioned: Provision | undefined;
  try {
    const baseUrl = (env.HERALD_URL ?? DEFAULT_URL).replace(/\/+$/, '');
    const host = new URL(baseUrl).hostname;
    if (!LOOPBACK.has(host) && !values.remote) usage(`HERALD_URL ${baseUrl} is not on this machine: pass --remote to load it on purpose`);
    let provisionFile = values.provision === undefined ? undefined : resolve(values.provision);
    if (provisionFile === undefined) {
      if (LOOPBACK.has(host)) await localInfrastructure(['DATABASE_URL'], false);
      provisioned = await provision(requiredEnv('DATABASE_URL'), pushPeer(env));
      provisionFile = join(await mkdtemp(join(tmpdir(), 'herald-provision-')), 'provision.json');
      await writeProvision(provisionFile, provisioned);
    }
    const summaryDir = resolve(values['summary-dir'] ?? env.LOAD_SUMMARY_DIR ?? join(repoRoot, 'loadtest', 'results'));
    await mkdir(summaryDir, { recursive: true });
    const runEnv: RunEnv = { baseUrl, form: values.smoke ? 'smoke' : 'full', summaryDir, env };
    process.stderr.write(`${script} (${runEnv.form}) against ${baseUrl} on ${RUNTIME_LABEL}\n`);
    const { written, exitCode, summary } = await runScript({
      script,
      env: runEnv,
      vars: {
        HERALD_URL: baseUrl,
        HERALD_PROVISION: provisionFile,
        HERALD_SUMMARY_DIR: summaryDir,
        ...(values.smoke ? { HERALD_SMOKE: '1' } : {}),
        ...(env.ENGAGEMENT_TOKEN_SECRET ? { ENGAGEMENT_TOKEN_SECRET: env.ENGAGEMENT_TOKEN_SECRET } : {}),
        ...vars,
      },
    });
    process.stderr.write(`summary written to ${written.join(' and ')}\n`);
    if (!summary.ok) process.stderr.write(`thresholds crossed: ${summary.thresholds.filter((result) => !result.ok).map((result) => `${result.key} ${result.expression}`).join('; ')}\n`);
    return exitCode;
  } finally {
    if (provisioned) await retire(requiredEnv('DATABASE_URL'), provisioned);
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
