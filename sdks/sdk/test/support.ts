import { createServer, request as httpRequest, type Server } from 'node:http';

/** What the SDK tests share: a counting proxy. */

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
