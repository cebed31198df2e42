import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

import { repoRoot } from './env.js';
import { freePort } from './processes.js';

/**
 * Mailpit for a test: the real SMTP server deploy/tools.sh builds into .local/bin (or
 * $HERALD_TOOLS_BIN), started on free loopback ports with an in-memory store, and read through
 * its HTTP API. A test gives `smtpUrl` to the stack as SMTP_URL and reads what arrived.
 */

export interface MailpitMessage {
  id: string;
  from: string;
  to: string[];
  subject: string;
  text: string;
  html: string;
  /** The Message-ID header, without its angle brackets. */
  messageId: string;
  /** When Mailpit accepted it (its own clock, millisecond precision). */
  receivedAt: Date;
}

export interface Mailpit {
  smtpUrl: string;
  apiUrl: string;
  /** The first message to `address` (case-insensitive) received after `since` messages to it; rejects after `timeoutMs`. */
  waitForMessage(address: string, options?: { timeoutMs?: number; since?: number }): Promise<MailpitMessage>;
  /** Every message to `address` so far, oldest first. */
  messagesTo(address: string): Promise<MailpitMessage[]>;
  stop(): Promise<void>;
}

interface Summary {
  ID: string;
  Created: string;
  To: { Address: string }[];
}
interface Full {
  ID: string;
  MessageID: string;
  From: { Address: string };
  To: { Address: string }[];
  Subject: string;
  Text: string;
  HTML: string;
}

function mailpitBinary(): string {
  const bin = join(process.env.HERALD_TOOLS_BIN ?? join(repoRoot, '.local', 'bin'), 'mailpit');
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run deploy/tools.sh, which builds Mailpit`);
  return bin;
}

export interface MailpitOptions {
  /** A regular expression (Go's syntax) recipients must match; any other is refused for good (a 5xx reply). Default: all accepted. */
  allowedRecipients?: string;
}

export async function startMailpit({ allowedRecipients }: MailpitOptions = {}): Promise<Mailpit> {
  const [smtpPort, httpPort] = [await freePort(), await freePort()];
  const args = ['--smtp', `127.0.0.1:${smtpPort}`, '--listen', `127.0.0.1:${httpPort}`, '--smtp-auth-accept-any', '--smtp-auth-allow-insecure', '--disable-version-check', '--quiet'];
  if (allowedRecipients !== undefined) args.push('--smtp-allowed-recipients', allowedRecipients);
  const child = spawn(mailpitBinary(), args, {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const apiUrl = `http://127.0.0.1:${httpPort}`;

  async function api<T>(path: string): Promise<T> {
    const response = await fetch(`${apiUrl}/api/v1${path}`);
    if (!response.ok) throw new Error(`mailpit ${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as T;
  }

  // Ready when its API answers (it binds SMTP before HTTP).
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`mailpit exited (${child.exitCode}):\n${output}`);
    const up = await api<unknown>('/info').then(
      () => true,
      () => false,
    );
    if (up) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`mailpit did not answer in 10 s:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }

  async function messagesTo(address: string): Promise<MailpitMessage[]> {
    const wanted = address.toLowerCase();
    const { messages } = await api<{ messages: Summary[] }>(`/messages?limit=1000`);
    // The API lists newest first.
    const mine = messages.filter((m) => m.To.some((to) => to.Address.toLowerCase() === wanted)).reverse();
    const created = new Map(mine.map((m) => [m.ID, m.Created]));
    return Promise.all(
      mine.map(async ({ ID }) => {
        const full = await api<Full>(`/message/${ID}`);
        return {
          id: full.ID,
          from: full.From.Address,
          to: full.To.map((to) => to.Address),
          subject: full.Subject,
          text: full.Text,
          html: full.HTML,
          messageId: full.MessageID,
          receivedAt: new Date(created.get(ID) ?? ''),
        };
      }),
    );
  }

  return {
    smtpUrl: `smtp://127.0.0.1:${smtpPort}`,
    apiUrl,
    messagesTo,
    async waitForMessage(address, { timeoutMs = 10_000, since = 0 } = {}) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const messages = await messagesTo(address);
        const message = messages[since];
        if (message) return message;
        if (Date.now() > until) throw new Error(`no message #${since + 1} to ${address} within ${timeoutMs} ms (${messages.length} so far)`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
