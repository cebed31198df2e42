import { isJsonObject, type Json } from './clients.js';

/** Asks a Herald server whether a key works (GET /identity) and whether its MCP endpoint answers. */

export const MCP_PATH = '/api/mcp/mcp';
const TIMEOUT_MS = 10_000;

export interface Identity {
  keyId: string;
  keyOrigin: string;
  workspace: string;
  plan: string;
}

export type KeyCheck =
  | { state: 'ready'; identity: Identity }
  | { state: 'key_rejected'; status: number; code: string; message: string }
  | { state: 'unreachable'; reason: string };

/** Why a request never got an answer, in the words of the system call when there is one. */
function failureOf(err: unknown): string {
  const cause = err instanceof Error && err.cause instanceof Error ? (err.cause as NodeJS.ErrnoException) : undefined;
  if (cause) return cause.code ?? cause.message;
  if (err instanceof Error && err.name === 'TimeoutError') return `no answer within ${TIMEOUT_MS / 1_000} s`;
  return err instanceof Error ? err.message : String(err);
}

async function request(url: string, init: RequestInit): Promise<{ status: number; body: Json } | { failure: string }> {
  try {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(TIMEOUT_MS) });
    const text = await response.text();
    let body: unknown = {};
    try {
      body = JSON.parse(text);
    } catch {
      // Not JSON: not a Herald answer; the status says enough.
    }
    return { status: response.status, body: isJsonObject(body) ? body : {} };
  } catch (err) {
    return { failure: failureOf(err) };
  }
}

const text = (value: unknown) => (typeof value === 'string' ? value : '');
const field = (value: unknown, name: string) => (isJsonObject(value) ? value[name] : undefined);

export async function checkKey(origin: string, key: string): Promise<KeyCheck> {
  const answer = await request(`${origin}/api/v1/server/identity`, { headers: { authorization: `Bearer ${key}` } });
  if ('failure' in answer) return { state: 'unreachable', reason: answer.failure };
  const { status, body } = answer;
  if (status === 200) {
    return {
      state: 'ready',
      identity: {
        keyId: text(field(body.key, 'id')),
        keyOrigin: text(field(body.key, 'origin')),
        workspace: text(field(body.workspace, 'name')),
        plan: text(field(body.plan, 'name')),
      },
    };
  }
  if (status === 401 || status === 403) return { state: 'key_rejected', status, code: text(body.code), message: text(body.message) };
  return { state: 'unreachable', reason: `${origin} answered HTTP ${status}, not as a Herald server does` };
}

export interface PairingLink {
  enrollmentUrl: string;
  expiresAt: string;
  externalId: string;
}

export type PairingAnswer = { state: 'ready'; link: PairingLink } | Exclude<KeyCheck, { state: 'ready' }>;

/** POST /pair: a single-use link that makes the browser opening it an approver device. */
export async function createPairing(origin: string, key: string, externalId: string | undefined): Promise<PairingAnswer> {
  const answer = await request(`${origin}/api/v1/server/pair`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(externalId === undefined ? {} : { externalId }),
  });
  if ('failure' in answer) return { state: 'unreachable', reason: answer.failure };
  const { status, body } = answer;
  if (status === 200) {
    return { state: 'ready', link: { enrollmentUrl: text(body.enrollmentUrl), expiresAt: text(body.expiresAt), externalId: text(body.externalId) } };
  }
  if (status >= 400 && status < 500) return { state: 'key_rejected', status, code: text(body.code), message: text(body.message) };
  return { state: 'unreachable', reason: `${origin} answered HTTP ${status}` };
}

/** The MCP handshake, as an agent client opens it (no key needed). */
export async function checkMcp(url: string): Promise<{ ok: true; server: string } | { ok: false; reason: string }> {
  const answer = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'herald-cli', version: '0.1.0' } } }),
  });
  if ('failure' in answer) return { ok: false, reason: answer.failure };
  const server = field(field(answer.body.result, 'serverInfo'), 'name');
  if (answer.status !== 200 || typeof server !== 'string') return { ok: false, reason: `the handshake answered HTTP ${answer.status}` };
  return { ok: true, server };
}

/** `https://host/` → `https://host`; the MCP endpoint → its origin. */
export const originOf = (url: string) => url.replace(/\/+$/, '').replace(new RegExp(`${MCP_PATH}$`), '');

/** The key's public part, safe to print: pk_<id>. */
export const publicIdOf = (key: string) => key.split('.')[0] ?? key;
