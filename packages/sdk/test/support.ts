import { createServer, request as httpRequest, type Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

import { connectDatabase } from '@herald/testkit';

/** What the SDK tests share: a counting proxy and a look at questions still waiting for a person. */

export interface CountingProxy {
  url: string;
  /** Requests that reached the proxy, as `METHOD path`. */
  requests: string[];
  close(): Promise<void>;
}

/** A plain HTTP proxy in front of a gateway that records every request: the SDK's retries would show here. */
export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const requests: string[] = [];
  const upstream = new URL(target);
  const server: Server = createServer((incoming, outgoing) => {
    requests.push(`${incoming.method} ${incoming.url}`);
    const forwarded = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: incoming.method, path: incoming.url, headers: incoming.headers },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    forwarded.on('error', () => outgoing.destroy());
    incoming.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || !address) throw new Error('the proxy has no address');
  return {
    url: `http://127.0.0.1:${address.port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The id of the workspace's newest pending question of a kind, once it exists (for a call still waiting on it). */
export async function pendingQuestionId(workspaceId: string, kind: 'ask' | 'decision'): Promise<string> {
  const db = await connectDatabase();
  try {
    for (;;) {
      const { rows } = await db.query<{ id: string }>(
        `SELECT id FROM decision.questions WHERE workspace_id = $1 AND kind = $2 AND status = 'pending' ORDER BY created_at DESC LIMIT 1`,
        [workspaceId, kind],
      );
      if (rows[0]) return rows[0].id;
      await sleep(20);
    }
  } finally {
    await db.end();
  }
}
