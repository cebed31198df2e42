/**
 * One request/response, whether it arrived as an HTTP/2 stream (raw stream API, no compat layer)
 * or as an HTTP/1.1 request on the TLS server's `allowHTTP1` fallback.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import http2, { type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { Readable } from 'node:stream';

export type HttpVersion = '1.0' | '1.1' | '2.0';

export type BodyResult =
  | { readonly kind: 'complete'; readonly bytes: Buffer }
  | { readonly kind: 'too-large'; readonly length: number }
  | { readonly kind: 'aborted' };

export interface Exchange {
  readonly method: string;
  /** The request target as sent (`:path`), query included. */
  readonly path: string;
  readonly httpVersion: HttpVersion;
  /** A request header by lower-case name; repeated fields are joined with ", ". */
  header(name: string): string | undefined;
  /** Reads the body; past `limit` octets it stops collecting and reports `too-large` at once. */
  readBody(limit: number): Promise<BodyResult>;
  /** Sends a complete response, unless the exchange is already answered or gone. */
  respond(status: number, headers: Readonly<Record<string, string>>, body?: string): void;
  /** HTTP/2: RST_STREAM with `code`; HTTP/1.1: destroy the connection. */
  reset(code?: number): void;
  /** True once the sender has gone (stream or connection closed) without an answer. */
  gone(): boolean;
}

function headerOf(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

function readBody(readable: Readable, limit: number): Promise<BodyResult> {
  if (readable.readableEnded) return Promise.resolve({ kind: 'complete', bytes: Buffer.alloc(0) });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let length = 0;
    const finish = (result: BodyResult) => {
      readable.off('data', onData);
      readable.off('end', onEnd);
      readable.off('close', onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      length += chunk.length;
      if (length > limit) {
        finish({ kind: 'too-large', length });
        readable.resume(); // keep draining, discarding
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => finish({ kind: 'complete', bytes: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length) });
    const onClose = () => finish({ kind: 'aborted' });
    readable.on('data', onData);
    readable.on('end', onEnd);
    readable.on('close', onClose);
  });
}

const noop = () => {};

export function http2Exchange(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): Exchange {
  stream.on('error', noop);
  return {
    method: headerOf(headers, ':method') ?? '',
    path: headerOf(headers, ':path') ?? '',
    httpVersion: '2.0',
    header: (name) => headerOf(headers, name),
    readBody: (limit) => readBody(stream, limit),
    respond(status, responseHeaders, body) {
      if (stream.destroyed || stream.closed || stream.headersSent) return;
      if (body === undefined) {
        stream.respond({ ':status': status, ...responseHeaders }, { endStream: true });
      } else {
        stream.respond({ ':status': status, ...responseHeaders });
        stream.end(body);
      }
    },
    reset(code = http2.constants.NGHTTP2_INTERNAL_ERROR) {
      if (!stream.destroyed && !stream.closed) stream.close(code);
    },
    gone: () => stream.destroyed || stream.closed,
  };
}

export function http1Exchange(req: IncomingMessage, res: ServerResponse): Exchange {
  req.on('error', noop);
  res.on('error', noop);
  return {
    method: req.method ?? '',
    path: req.url ?? '',
    httpVersion: req.httpVersion === '1.0' ? '1.0' : '1.1',
    header: (name) => headerOf(req.headers, name),
    readBody: (limit) => readBody(req, limit),
    respond(status, responseHeaders, body) {
      if (res.headersSent || res.destroyed) return;
      res.writeHead(status, responseHeaders);
      res.end(body);
    },
    reset() {
      req.socket.destroy();
    },
    gone: () => res.destroyed || req.socket.destroyed,
  };
}
