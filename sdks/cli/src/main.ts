#!/usr/bin/env node
import { homedir } from 'node:os';
import { parseArgs } from 'node:util';

import { renderUnicodeCompact } from 'uqr';

import { checkKey, checkMcp, createPairing, MCP_PATH, originOf, publicIdOf, type KeyCheck } from './check.js';
import { agentClients, ConfigFileError, modeOf, readHeraldEntry, writeHeraldEntry, type AgentClient, type HeraldEntry } from './clients.js';

/** `herald setup | status | doctor | pair`: wires agent clients to a Herald server's MCP endpoint, and pairs the phone that answers. */

const EXIT = { ready: 0, failed: 1, usage: 2, notSetUp: 3, keyRejected: 4, unreachable: 5 } as const;
const DEFAULT_URL = 'http://localhost:8080';

const USAGE = `Usage:
  herald setup [--key <pk_id.secret>] [--url <origin>] [--client <id>]...
  herald status [--json]
  herald doctor
  herald pair [--external-id <id>] [--key <pk_id.secret>] [--url <origin>]

setup   verifies the key (GET /identity) and adds a "herald" MCP server to each agent client's
        configuration: ${agentClients()
          .map((client) => client.id)
          .join(', ')} (all unless --client names some).
        The key comes from --key, else HERALD_API_KEY, else a prompt (in a terminal only);
        the URL from --url, else HERALD_URL, else ${DEFAULT_URL}.
status  whether the configured clients are ready; exit 0 ready, 3 not set up, 4 key rejected,
        5 server unreachable (1 failed, 2 usage error).
doctor  the same checks, explained in sentences.
pair    makes a single-use pairing link (POST /pair) and prints it with a QR code: the browser
        that opens it (scan it with your phone) becomes the key owner's approver device, or
        --external-id's, and receives the questions agents ask. The key and URL come from
        --key/--url, else HERALD_API_KEY/HERALD_URL, else the configuration setup wrote.`;

class UsageError extends Error {}

const shown = (path: string) => (path.startsWith(homedir()) ? `~${path.slice(homedir().length)}` : path);

async function promptForKey(): Promise<string> {
  const stdin = process.stdin;
  process.stderr.write('Herald API key (pk_<id>.<secret>; not shown): ');
  stdin.setRawMode(true);
  stdin.setEncoding('utf8');
  stdin.resume();
  return new Promise((resolve, reject) => {
    let typed = '';
    const finish = () => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write('\n');
    };
    const onData = (chunk: string) => {
      for (const char of chunk) {
        if (char === '\r' || char === '\n') {
          finish();
          resolve(typed.trim());
          return;
        }
        if (char === '\u0003') {
          finish();
          reject(new UsageError('Cancelled.'));
          return;
        }
        typed = char === '\u007f' || char === '\b' ? typed.slice(0, -1) : typed + char;
      }
    };
    stdin.on('data', onData);
  });
}

function parseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`--url must be a URL such as ${DEFAULT_URL}, got "${value}".`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`--url must use http or https, got "${url.protocol}".`);
  return originOf(url.href);
}

/** Why a key check failed, as one sentence, and the exit code it means. */
function problemOf(check: Exclude<KeyCheck, { state: 'ready' }>, origin: string): { exit: number; sentence: string } {
  if (check.state === 'unreachable') {
    return { exit: EXIT.unreachable, sentence: `Herald at ${origin} could not be reached (${check.reason}). Is the server running, and is the URL right?` };
  }
  return { exit: EXIT.keyRejected, sentence: `${origin} refused the key (${check.status} ${check.code}: ${check.message}).` };
}

async function setup(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { key: { type: 'string' }, url: { type: 'string' }, client: { type: 'string', multiple: true } }, strict: true });
  const origin = parseUrl(values.url ?? process.env.HERALD_URL ?? DEFAULT_URL);
  const all = agentClients();
  const unknown = (values.client ?? []).filter((id) => !all.some((client) => client.id === id));
  if (unknown.length > 0) throw new UsageError(`Unknown client ${unknown.join(', ')}; choose from ${all.map((client) => client.id).join(', ')}.`);
  const clients = values.client ? all.filter((client) => values.client?.includes(client.id)) : all;

  let key = values.key ?? process.env.HERALD_API_KEY;
  if (key === undefined) {
    if (!process.stdin.isTTY) throw new UsageError('No API key: pass --key, set HERALD_API_KEY, or run setup in a terminal to be asked for it.');
    key = await promptForKey();
  }
  if (!/^pk_[^.\s]+\.\S+$/.test(key)) {
    throw new UsageError('That is not a full API key: it looks like pk_<id>.<secret>. (A site key pk_<id> is public and cannot call tools.)');
  }

  const check = await checkKey(origin, key);
  if (check.state !== 'ready') {
    const problem = problemOf(check, origin);
    process.stderr.write(`${problem.sentence} Nothing was changed.\n`);
    return problem.exit;
  }
  const { identity } = check;
  process.stdout.write(`Key ${publicIdOf(key)} (${identity.keyOrigin}) works: workspace "${identity.workspace}", plan ${identity.plan}.\n`);

  const entry: HeraldEntry = { url: `${origin}${MCP_PATH}`, key };
  let failed = false;
  for (const client of clients) {
    try {
      const outcome = await writeHeraldEntry(client, entry);
      const backup = outcome.backup ? ` (previous file kept as ${shown(outcome.backup)})` : '';
      process.stdout.write(`${client.name}: ${outcome.changed ? `wrote ${shown(client.path)}${backup}` : `${shown(client.path)} already up to date`}.\n`);
    } catch (err) {
      if (!(err instanceof ConfigFileError)) throw err;
      failed = true;
      process.stderr.write(`${client.name}: not changed: ${err.message}.\n`);
    }
  }
  process.stdout.write(`Restart the agent clients to load Herald's tools from ${entry.url}.\n`);
  return failed ? EXIT.failed : EXIT.ready;
}

interface ClientReport {
  client: AgentClient;
  entry: HeraldEntry | null;
  fileProblem: string | null;
  check: KeyCheck | null;
}

type State = 'ready' | 'not_set_up' | 'key_rejected' | 'unreachable';
const exitOf: Record<State, number> = { ready: EXIT.ready, not_set_up: EXIT.notSetUp, key_rejected: EXIT.keyRejected, unreachable: EXIT.unreachable };

/** Reads every client's file and checks each distinct (URL, key) once. */
async function inspect(): Promise<{ state: State; reports: ClientReport[] }> {
  const checks = new Map<string, Promise<KeyCheck>>();
  const reports = await Promise.all(
    agentClients().map(async (client): Promise<ClientReport> => {
      let entry: HeraldEntry | null = null;
      try {
        entry = await readHeraldEntry(client);
      } catch (err) {
        if (!(err instanceof ConfigFileError)) throw err;
        return { client, entry: null, fileProblem: err.message, check: null };
      }
      if (!entry) return { client, entry, fileProblem: null, check: null };
      const id = `${entry.url}\n${entry.key}`;
      if (!checks.has(id)) checks.set(id, checkKey(originOf(entry.url), entry.key));
      return { client, entry, fileProblem: null, check: (await checks.get(id)) ?? null };
    }),
  );
  const states = reports.flatMap((report) => (report.check ? [report.check.state] : []));
  const state: State = states.length === 0 ? 'not_set_up' : states.includes('unreachable') ? 'unreachable' : states.includes('key_rejected') ? 'key_rejected' : 'ready';
  return { state, reports };
}

const SUMMARY: Record<State, string> = {
  ready: 'Herald is set up and its key works.',
  not_set_up: 'Herald is not set up for any agent client; run `herald setup`.',
  key_rejected: 'Herald is set up, but the server refuses the key.',
  unreachable: 'Herald is set up, but the server cannot be reached.',
};

async function status(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { json: { type: 'boolean', default: false } }, strict: true });
  const { state, reports } = await inspect();
  if (!values.json) {
    process.stdout.write(`${SUMMARY[state]}\n`);
    return exitOf[state];
  }
  const clients = reports.map(({ client, entry, fileProblem, check }) => ({
    id: client.id,
    name: client.name,
    path: client.path,
    configured: entry !== null,
    ...(entry && { url: entry.url, keyId: publicIdOf(entry.key) }),
    ...(check && { state: check.state }),
    ...(check?.state === 'ready' && { workspace: check.identity.workspace, plan: check.identity.plan }),
    ...(fileProblem && { problem: fileProblem }),
  }));
  process.stdout.write(`${JSON.stringify({ state, exitCode: exitOf[state], message: SUMMARY[state], clients }, null, 2)}\n`);
  return exitOf[state];
}

async function doctor(): Promise<number> {
  const { state, reports } = await inspect();
  const lines: string[] = [];
  let problems = 0;
  const handshakes = new Map<string, ReturnType<typeof checkMcp>>();
  for (const { client, entry, fileProblem, check } of reports) {
    const where = `${client.name} (${shown(client.path)})`;
    if (fileProblem) {
      problems += 1;
      lines.push(`${where}: ${fileProblem}.`);
      continue;
    }
    if (!entry || !check) {
      lines.push(`${where}: no Herald server configured; \`herald setup\` adds one.`);
      continue;
    }
    const origin = originOf(entry.url);
    if (check.state === 'ready') {
      const { identity } = check;
      lines.push(`${where}: ready. Key ${publicIdOf(entry.key)} (${identity.keyOrigin}) works for workspace "${identity.workspace}" on the ${identity.plan} plan at ${origin}.`);
      if (!handshakes.has(entry.url)) handshakes.set(entry.url, checkMcp(entry.url));
      const handshake = await handshakes.get(entry.url);
      if (handshake && !handshake.ok) {
        problems += 1;
        lines.push(`  The MCP endpoint ${entry.url} does not answer the handshake (${handshake.reason}), so ${client.name} will not see Herald's tools.`);
      }
    } else {
      problems += 1;
      const advice =
        check.state === 'unreachable'
          ? 'Start the server, or run `herald setup --url <origin>` if it moved.'
          : 'Create a new key (or fix the workspace plan) and run `herald setup --key <new key>`.';
      lines.push(`${where}: ${problemOf(check, origin).sentence} ${advice}`);
    }
    const mode = await modeOf(client.path);
    if (mode !== null && (mode & 0o077) !== 0) {
      problems += 1;
      lines.push(`  ${shown(client.path)} holds your key but other users may read it (mode ${mode.toString(8)}); run \`chmod 600 ${client.path}\`.`);
    }
  }
  lines.push(SUMMARY[state]);
  if (state !== 'not_set_up') lines.push(problems === 0 ? 'No problems found.' : `${problems} problem${problems === 1 ? '' : 's'} found.`);
  process.stdout.write(`${lines.join('\n')}\n`);
  return exitOf[state];
}

/** The key and server to use: the options, the environment, else the first agent client setup configured. */
async function configuredKey(values: { key?: string | undefined; url?: string | undefined }): Promise<{ key: string; origin: string } | undefined> {
  const key = values.key ?? process.env.HERALD_API_KEY;
  const url = values.url ?? process.env.HERALD_URL;
  if (key !== undefined) return { key, origin: parseUrl(url ?? DEFAULT_URL) };
  for (const client of agentClients()) {
    const entry = await readHeraldEntry(client).catch((err: unknown) => {
      if (err instanceof ConfigFileError) return null;
      throw err;
    });
    if (entry) return { key: entry.key, origin: url === undefined ? originOf(entry.url) : parseUrl(url) };
  }
  return undefined;
}

async function pair(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { key: { type: 'string' }, url: { type: 'string' }, 'external-id': { type: 'string' } }, strict: true });
  const configured = await configuredKey(values);
  if (!configured) {
    process.stderr.write('No API key: pass --key, set HERALD_API_KEY, or run `herald setup` first.\n');
    return EXIT.notSetUp;
  }
  const externalId = values['external-id'];
  if (externalId === '') throw new UsageError('--external-id must not be empty.');
  const answer = await createPairing(configured.origin, configured.key, externalId);
  if (answer.state !== 'ready') {
    const problem = problemOf(answer, configured.origin);
    process.stderr.write(`${problem.sentence}\n`);
    return problem.exit;
  }
  const { link } = answer;
  const minutes = Math.max(1, Math.round((Date.parse(link.expiresAt) - Date.now()) / 60_000));
  process.stdout.write(
    [
      `Open this link on the device that should receive ${link.externalId === 'owner' ? 'your' : `${link.externalId}'s`} questions (it works once):`,
      '',
      link.enrollmentUrl,
      '',
      renderUnicodeCompact(link.enrollmentUrl, { border: 2 }),
      '',
      `Scan the code with the phone's camera, open the page and allow notifications. The link expires at ${link.expiresAt} (in about ${minutes} minute${minutes === 1 ? '' : 's'}).`,
      '',
    ].join('\n'),
  );
  return EXIT.ready;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  switch (command) {
    case 'setup':
      return setup(args);
    case 'status':
      return status(args);
    case 'doctor':
      return doctor();
    case 'pair':
      return pair(args);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n`);
      return command === undefined ? EXIT.usage : EXIT.ready;
    default:
      throw new UsageError(`Unknown command "${command}".`);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // parseArgs reports unknown or malformed options with a TypeError carrying an ERR_PARSE_ARGS_* code.
    const usage = err instanceof UsageError || (err instanceof TypeError && String((err as NodeJS.ErrnoException).code).startsWith('ERR_PARSE_ARGS'));
    process.stderr.write(usage ? `${(err as Error).message}\n\n${USAGE}\n` : `herald: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = usage ? EXIT.usage : EXIT.failed;
  },
);
