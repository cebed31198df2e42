/**
 * Local push-service stand-ins: HTTP/2 (TLS or h2c) and HTTP/1.1 (TLS or plain) servers that count
 * sessions/connections and concurrent requests and record what they received.
 */
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

import type { SelfSigned } from './cert.js';

export interface Received {
  headers: Record<string, string>;
  body: Buffer;
  httpVersion: string;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  /** Delay before answering, ms. */
  delayMs?: number;
  /** Never answer. */
  hang?: boolean;
}

export interface PeerOptions {
  kind: 'h2' | 'h2c' | 'https1' | 'http1';
  cert?: SelfSigned;
  /** Decide the answer (default: 201 after `delayMs`). */
  reply?: (req: Received, index: number) => Reply;
  delayMs?: number;
  /**
   * HTTP/2 only: called for every new stream with the server-side session and its stream count. Returning
   * 'ignore' leaves the stream unprocessed (e.g. above the lastStreamID of a GOAWAY this peer sent).
   */
  onStream?: (session: http2.Http2Session, streamsOnSession: number, stream: http2.ServerHttp2Stream) => void | 'ignore';
  settings?: http2.Settings;
}

export interface Peer {
  origin: string;
  /** HTTP/2 sessions or HTTP/1.1 connections accepted. */
  connections: number;
  requests: number;
  current: number;
  maxConcurrent: number;
  received: Received[];
  close(): Promise<void>;
}

function flat(headers: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

export async function startPeer(options: PeerOptions): Promise<Peer> {
  const peer: Peer = {
    origin: '',
    connections: 0,
    requests: 0,
    current: 0,
    maxConcurrent: 0,
    received: [],
    close: async () => {},
  };
  const decide = (req: Received): Reply => {
    const index = peer.requests++;
    peer.received.push(req);
    return options.reply?.(req, index) ?? { status: 201, delayMs: options.delayMs ?? 0 };
  };
  const begin = (): void => {
    peer.current++;
    if (peer.current > peer.maxConcurrent) peer.maxConcurrent = peer.current;
  };
  const later = (delayMs: number | undefined, fn: () => void): void => {
    if (delayMs === undefined || delayMs <= 0) setImmediate(fn);
    else setTimeout(fn, delayMs);
  };

  let server: http.Server | http2.Http2Server | http2.Http2SecureServer;
  const live = new Set<{ destroy(): void }>();

  if (options.kind === 'h2' || options.kind === 'h2c') {
    const s =
      options.kind === 'h2'
        ? http2.createSecureServer({ key: options.cert!.key, cert: options.cert!.cert, settings: options.settings ?? {} })
        : http2.createServer({ settings: options.settings ?? {} });
    const perSession = new WeakMap<http2.Http2Session, number>();
    s.on('session', (session) => {
      peer.connections++;
      live.add(session);
      session.on('close', () => live.delete(session));
      session.on('error', () => {});
    });
    s.on('stream', (stream, headers) => {
      const n = (perSession.get(stream.session!) ?? 0) + 1;
      perSession.set(stream.session!, n);
      stream.on('error', () => {});
      if (options.onStream?.(stream.session!, n, stream) === 'ignore') return;
      begin();
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const reply = decide({ headers: flat(headers as http.IncomingHttpHeaders), body: Buffer.concat(chunks), httpVersion: '2.0' });
        if (reply.hang === true) {
          stream.on('close', () => peer.current--);
          return;
        }
        later(reply.delayMs, () => {
          if (stream.destroyed || stream.closed) {
            peer.current--;
            return;
          }
          peer.current--;
          stream.respond({ ':status': reply.status, ...reply.headers }, { endStream: reply.body === undefined });
          if (reply.body !== undefined) stream.end(reply.body);
        });
      });
    });
    server = s;
  } else {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      begin();
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const reply = decide({ headers: flat(req.headers), body: Buffer.concat(chunks), httpVersion: req.httpVersion });
        if (reply.hang === true) {
          res.on('close', () => peer.current--);
          return;
        }
        later(reply.delayMs, () => {
          peer.current--;
          res.writeHead(reply.status, reply.headers);
          res.end(reply.body);
        });
      });
    };
    const s =
      options.kind === 'https1'
        ? https.createServer({ key: options.cert!.key, cert: options.cert!.cert }, handler)
        : http.createServer(handler);
    s.on(options.kind === 'https1' ? 'secureConnection' : 'connection', (socket: { destroy(): void; on(e: string, f: () => void): void }) => {
      peer.connections++;
      live.add(socket);
      socket.on('close', () => live.delete(socket));
    });
    server = s;
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  peer.origin = `${options.kind === 'h2' || options.kind === 'https1' ? 'https' : 'http'}://127.0.0.1:${port}`;
  peer.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const c of live) c.destroy();
    });
  return peer;
}
