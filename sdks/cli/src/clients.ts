import { chmod, copyFile, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * The agent clients Herald is wired into: where each keeps its MCP servers and what a Herald entry
 * looks like there. Setup merges the one `herald` entry and leaves everything else in the file alone.
 */

export type Json = Record<string, unknown>;
export const isJsonObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

const SERVER_NAME = 'herald';

export interface HeraldEntry {
  /** The MCP endpoint, {origin}/api/mcp/mcp. */
  url: string;
  key: string;
}

export interface AgentClient {
  id: string;
  name: string;
  path: string;
  /** The object in the file that holds the servers by name. */
  serversKey: 'mcpServers' | 'servers';
  entry(herald: HeraldEntry): Json;
  /** The Herald entry read back (null when it is not one setup wrote). */
  read(entry: Json): HeraldEntry | null;
}

const bearer = (key: string) => `Bearer ${key}`;
const keyOf = (authorization: unknown) => (typeof authorization === 'string' && authorization.startsWith('Bearer ') ? authorization.slice(7) : null);

/** Clients that speak Streamable HTTP themselves: the endpoint and the key as a header. */
function readHttpEntry(entry: Json): HeraldEntry | null {
  const headers = entry.headers;
  const key = isJsonObject(headers) ? keyOf(headers.Authorization) : null;
  return typeof entry.url === 'string' && key ? { url: entry.url, key } : null;
}

/** Where the desktop apps keep their settings: ~/Library/Application Support, %APPDATA%, or $XDG_CONFIG_HOME. */
function appConfigDir(env: NodeJS.ProcessEnv): string {
  if (process.platform === 'darwin') return join(homedir(), 'Library', 'Application Support');
  if (process.platform === 'win32') return env.APPDATA ?? join(homedir(), 'AppData', 'Roaming');
  return env.XDG_CONFIG_HOME || join(homedir(), '.config');
}

export function agentClients(env: NodeJS.ProcessEnv = process.env): AgentClient[] {
  const home = homedir();
  return [
    {
      id: 'claude-code',
      name: 'Claude Code',
      path: join(home, '.claude.json'),
      serversKey: 'mcpServers',
      entry: ({ url, key }) => ({ type: 'http', url, headers: { Authorization: bearer(key) } }),
      read: readHttpEntry,
    },
    {
      // Claude Desktop starts only local (stdio) servers from its file: mcp-remote bridges to the
      // endpoint, with the key in the entry's environment rather than on its command line.
      id: 'claude-desktop',
      name: 'Claude Desktop',
      path: join(appConfigDir(env), 'Claude', 'claude_desktop_config.json'),
      serversKey: 'mcpServers',
      entry: ({ url, key }) => ({
        command: 'npx',
        args: ['-y', 'mcp-remote', url, '--header', 'Authorization:${HERALD_AUTHORIZATION}'],
        env: { HERALD_AUTHORIZATION: bearer(key) },
      }),
      read: (entry) => {
        const url = Array.isArray(entry.args) ? entry.args[2] : undefined;
        const key = isJsonObject(entry.env) ? keyOf(entry.env.HERALD_AUTHORIZATION) : null;
        return typeof url === 'string' && key ? { url, key } : null;
      },
    },
    {
      id: 'cursor',
      name: 'Cursor',
      path: join(home, '.cursor', 'mcp.json'),
      serversKey: 'mcpServers',
      entry: ({ url, key }) => ({ url, headers: { Authorization: bearer(key) } }),
      read: readHttpEntry,
    },
    {
      id: 'vscode',
      name: 'VS Code',
      path: join(appConfigDir(env), 'Code', 'User', 'mcp.json'),
      serversKey: 'servers',
      entry: ({ url, key }) => ({ type: 'http', url, headers: { Authorization: bearer(key) } }),
      read: readHttpEntry,
    },
  ];
}

export class ConfigFileError extends Error {}

/** The file's JSON object; an empty object when it does not exist. Never guesses at a file it cannot parse. */
async function readConfigFile(path: string): Promise<Json | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  let parsed: unknown;
  try {
    parsed = text.trim() === '' ? {} : JSON.parse(text);
  } catch (err) {
    throw new ConfigFileError(`${path} is not valid JSON (${(err as Error).message}); fix or move it, then run setup again`);
  }
  if (!isJsonObject(parsed)) throw new ConfigFileError(`${path} does not hold a JSON object; fix or move it, then run setup again`);
  return parsed;
}

/** The Herald entry of a client's file, if setup wrote one. */
export async function readHeraldEntry(client: AgentClient): Promise<HeraldEntry | null> {
  const config = await readConfigFile(client.path);
  const servers = config?.[client.serversKey];
  const entry = isJsonObject(servers) ? servers[SERVER_NAME] : undefined;
  return isJsonObject(entry) ? client.read(entry) : null;
}

export interface WriteOutcome {
  changed: boolean;
  backup: string | null;
}

const backupStamp = (now: Date) => now.toISOString().replace(/[-:.]/g, '');

/** Merges the Herald entry into the client's file: a backup of what was there first, then an atomic replace, mode 0600 (it holds the key). */
export async function writeHeraldEntry(client: AgentClient, herald: HeraldEntry, now = new Date()): Promise<WriteOutcome> {
  const existing = await readConfigFile(client.path);
  const config = existing ?? {};
  const servers = config[client.serversKey] ?? {};
  if (!isJsonObject(servers)) throw new ConfigFileError(`"${client.serversKey}" in ${client.path} is not an object; fix it, then run setup again`);
  const entry = client.entry(herald);
  if (JSON.stringify(servers[SERVER_NAME]) === JSON.stringify(entry)) {
    await chmod(client.path, 0o600);
    return { changed: false, backup: null };
  }
  const updated = { ...config, [client.serversKey]: { ...servers, [SERVER_NAME]: entry } };
  await mkdir(dirname(client.path), { recursive: true, mode: 0o700 });
  let backup: string | null = null;
  if (existing !== null) {
    backup = `${client.path}.herald-backup-${backupStamp(now)}`;
    await copyFile(client.path, backup);
    await chmod(backup, 0o600);
  }
  const temporary = `${client.path}.herald-${process.pid}`;
  await writeFile(temporary, `${JSON.stringify(updated, null, 2)}\n`, { mode: 0o600 });
  await rename(temporary, client.path);
  return { changed: true, backup };
}

/** The permission bits of a file, or null when it does not exist. */
export async function modeOf(path: string): Promise<number | null> {
  try {
    return (await stat(path)).mode & 0o777;
  } catch {
    return null;
  }
}
