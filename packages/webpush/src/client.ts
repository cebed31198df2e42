/**
 * The HTTP sender: one HTTP/2 session per push-service origin, a bounded number of concurrent streams
 * per origin with a FIFO queue for the rest, per-request timeouts, and an HTTP/1.1 keep-alive fallback
 * for origins that do not negotiate h2.
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import tls from 'node:tls';

import { PushNetworkError, type PushNetworkErrorCode } from './errors.js';
import { H2_NO_ERROR, H2_REFUSED_STREAM, H2Connection, type StreamHandlers } from './h2.js';

export type Urgency = 'very-low' | 'low' | 'normal' | 'high';

export interface PushRequest {
  /** The subscription's endpoint URL. */
  endpoint: string;
  /** The encrypted body (`encrypt`'s output). */
  body: Buffer;
  /** Seconds the push service should keep the message for an offline user agent (integer >= 0). */
  ttl: number;
  urgency?: Urgency;
  /** Replaces an undelivered message with the same topic: at most 32 characters of the base64url alphabet. */
  topic?: string;
  /** `VapidSigner.authorization(...)`'s value: `vapid t=..., k=...`. */
  vapidAuthorization: string;
}

export interface PushResponse {
  status: number;
  headers: { 'retry-after'?: string; location?: string };
  /** From `send()` to the end of the response, queueing included. */
  durationMs: number;
  /** For non-2xx answers only: the start of the response body (at most 1 KiB), for logs. */
  body?: string;
}

export interface PushClientOptions {
  /** Concurrent requests per origin (HTTP/2 streams; never more than the server's SETTINGS allow). Default 100. */
  maxConcurrentStreams?: number;
  /** Requests waiting per origin beyond the concurrent ones; more reject with QUEUE_FULL. Default 10,000. */
  maxQueuedPerOrigin?: number;
  /** From dispatch (not from queueing) to the response headers. Default 30 s. */
  requestTimeoutMs?: number;
  /** TCP + TLS handshake. Default 10 s. */
  connectTimeoutMs?: number;
  /** Close a session (or keep-alive socket) idle this long. Default 120 s. */
  idleTimeoutMs?: number;
  /** Keep-alive sockets per origin for HTTP/1.1 origins (also caps their concurrency). Default 32. */
  http1MaxSockets?: number;
  /**
   * `http:` endpoints (test peers only; real push services are https): `'h2c'` = HTTP/2 with prior knowledge,
   * `'http1'` = HTTP/1.1, `'refuse'` (default) = reject them.
   */
  plaintext?: 'h2c' | 'http1' | 'refuse';
  /** Extra trust for `https:` peers, e.g. a test server's self-signed certificate. */
  tls?: { ca?: string | Buffer | Array<string | Buffer>; rejectUnauthorized?: boolean };
  /** Origins kept; idle ones beyond this are closed. Default 1,000. */
  maxOrigins?: number;
}

export interface OriginStats {
  protocol: 'h2' | 'http1' | 'unknown';
  inFlight: number;
  queued: number;
  /** HTTP/2 sessions open now (a draining one after GOAWAY counts until it closes). */
  sessions: number;
  /** HTTP/2 sessions opened over the pool's life. */
  sessionsOpened: number;
  /** HTTP/1.1 keep-alive sockets open now (busy + idle). */
  http1Sockets: number;
}

const URGENCIES: ReadonlySet<string> = new Set(['very-low', 'low', 'normal', 'high']);
const TOPIC = /^[A-Za-z0-9_-]{1,32}$/;
const MAX_ERROR_BODY = 1024;
/** Internal re-sends of a stream the server refused unprocessed (GOAWAY above last-stream-id, REFUSED_STREAM). */
const MAX_REFUSALS = 3;

/** Certificate verification failures: retrying will not help until the configuration changes. */
const CERT_ERRORS: ReadonlySet<string> = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_REVOKED',
  'CERT_SIGNATURE_FAILURE',
  'INVALID_CA',
  'HOSTNAME_MISMATCH',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);
const CONNECT_ERRORS: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'EADDRNOTAVAIL',
]);

interface Task {
  readonly request: PushRequest;
  readonly path: string;
  readonly startedAt: number;
  readonly resolve: (response: PushResponse) => void;
  readonly reject: (error: Error) => void;
  refusals: number;
  next: Task | undefined;
}

/** A dispatched request's deadline; `expire` is dropped once the request is done. */
interface Deadline {
  readonly at: number;
  expire: (() => void) | undefined;
  next: Deadline | undefined;
}

interface Settings {
  maxStreams: number;
  maxQueued: number;
  requestTimeoutMs: number;
  connectTimeoutMs: number;
  idleTimeoutMs: number;
  http1MaxSockets: number;
  plaintext: 'h2c' | 'http1' | 'refuse';
  ca: string | Buffer | Array<string | Buffer> | undefined;
  rejectUnauthorized: boolean;
}

function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : '';
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A failure before the request left this process: never delivered. */
function connectError(origin: string, err: unknown): PushNetworkError {
  if (err instanceof PushNetworkError) return err;
  const code = errorCode(err);
  if (CERT_ERRORS.has(code)) {
    return new PushNetworkError(`TLS certificate of ${origin} not trusted: ${describe(err)}`, 'TLS', false, false, origin, { cause: err });
  }
  return new PushNetworkError(`cannot connect to ${origin}: ${describe(err)}`, 'CONNECT', true, false, origin, { cause: err });
}

/** A failure after the request may have been written. */
function requestError(origin: string, err: unknown, fallback: PushNetworkErrorCode = 'RESET'): PushNetworkError {
  if (err instanceof PushNetworkError) return err;
  const code = errorCode(err);
  if (CONNECT_ERRORS.has(code) || CERT_ERRORS.has(code)) return connectError(origin, err);
  return new PushNetworkError(
    `request to ${origin} failed: ${err === undefined ? 'stream closed without a response' : describe(err)}`,
    fallback,
    true,
    true,
    origin,
    { cause: err },
  );
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

class OriginPool {
  protocol: 'h2' | 'http1' | 'unknown' = 'unknown';
  inFlight = 0;
  queued = 0;
  sessionsOpened = 0;
  readonly sessions = new Set<H2Connection>();
  closed = false;

  private head: Task | undefined;
  private tail: Task | undefined;
  /** The session new streams go to; undefined while connecting or after GOAWAY/error/close. */
  private session: H2Connection | undefined;
  private connecting = false;
  private agent: http.Agent | undefined;
  private probe: net.Socket | undefined;
  /**
   * Deadlines of dispatched requests in dispatch order. The timeout is the same for all, so this is also
   * deadline order: one timer for the oldest replaces a timer per request.
   */
  private deadlineHead: Deadline | undefined;
  private deadlineTail: Deadline | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private readonly pinging = new WeakSet<H2Connection>();
  private readonly secure: boolean;
  private readonly hostname: string;
  private readonly port: number;
  /** The :authority of every request: host and port as the endpoint URL has them. */
  private readonly authority: string;

  constructor(
    readonly origin: string,
    url: URL,
    private readonly settings: Settings,
    private readonly onIdle: () => void,
  ) {
    this.secure = url.protocol === 'https:';
    this.hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    this.port = url.port === '' ? (this.secure ? 443 : 80) : Number(url.port);
    this.authority = url.host;
    if (!this.secure) this.protocol = settings.plaintext === 'h2c' ? 'h2' : 'http1';
  }

  get http1Sockets(): number {
    const agent = this.agent;
    if (agent === undefined) return 0;
    let n = 0;
    for (const list of Object.values(agent.sockets)) n += list?.length ?? 0;
    for (const list of Object.values(agent.freeSockets)) n += list?.length ?? 0;
    return n;
  }

  get idle(): boolean {
    return this.inFlight === 0 && this.queued === 0;
  }

  enqueue(task: Task): void {
    if (this.queued >= this.settings.maxQueued && this.head !== undefined) {
      task.reject(
        new PushNetworkError(`too many requests queued for ${this.origin} (${this.queued})`, 'QUEUE_FULL', true, false, this.origin),
      );
      return;
    }
    if (this.tail === undefined) this.head = task;
    else this.tail.next = task;
    this.tail = task;
    this.queued++;
    this.pump();
  }

  private requeueFirst(task: Task): void {
    task.next = this.head;
    this.head = task;
    if (this.tail === undefined) this.tail = task;
    this.queued++;
  }

  private shift(): Task {
    const task = this.head!;
    this.head = task.next;
    if (this.head === undefined) this.tail = undefined;
    task.next = undefined;
    this.queued--;
    return task;
  }

  private pump(): void {
    while (this.queued > 0 && !this.closed) {
      if (this.protocol === 'http1') {
        if (this.inFlight >= Math.min(this.settings.maxStreams, this.settings.http1MaxSockets)) return;
        this.dispatchHttp1(this.shift());
        continue;
      }
      const session = this.session;
      if (session === undefined) {
        if (!this.connecting) this.connect();
        return;
      }
      if (this.inFlight >= Math.min(this.settings.maxStreams, session.peerStreamLimit)) return;
      this.dispatchH2(session, this.shift());
    }
  }

  /** Called when a request finished one way or another. */
  private done(deadline: Deadline): void {
    deadline.expire = undefined;
    // completions are roughly FIFO: drop finished deadlines from the front so the list stays ~inFlight long
    while (this.deadlineHead !== undefined && this.deadlineHead.expire === undefined) this.deadlineHead = this.deadlineHead.next;
    if (this.deadlineHead === undefined) this.deadlineTail = undefined;
    this.inFlight--;
    this.pump();
    if (this.idle) {
      this.armIdle();
      this.onIdle();
    }
  }

  private track(expire: () => void): Deadline {
    const deadline: Deadline = { at: performance.now() + this.settings.requestTimeoutMs, expire, next: undefined };
    if (this.deadlineTail === undefined) this.deadlineHead = deadline;
    else this.deadlineTail.next = deadline;
    this.deadlineTail = deadline;
    if (this.deadlineTimer === undefined) this.armDeadline();
    if (this.idleTimer !== undefined) {
      clearTimeout(this.idleTimer);
      this.idleTimer = undefined;
    }
    return deadline;
  }

  private armDeadline(): void {
    const head = this.deadlineHead;
    if (head === undefined) {
      this.deadlineTimer = undefined;
      return;
    }
    // unref: whatever is in flight keeps the process alive through its socket
    this.deadlineTimer = setTimeout(this.onDeadline, Math.max(1, Math.ceil(head.at - performance.now()))).unref();
  }

  private readonly onDeadline = (): void => {
    const now = performance.now();
    let head = this.deadlineHead;
    while (head !== undefined && (head.expire === undefined || head.at <= now)) {
      const expire = head.expire;
      head.expire = undefined;
      head = head.next;
      this.deadlineHead = head;
      expire?.();
    }
    if (this.deadlineHead === undefined) this.deadlineTail = undefined;
    this.armDeadline();
  };

  /** Close sessions once the origin has been idle for idleTimeoutMs (keep-alive sockets use the agent's timeout). */
  private armIdle(): void {
    if (this.idleTimer !== undefined || this.sessions.size === 0 || this.closed) return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (!this.idle) return;
      this.session = undefined;
      for (const session of this.sessions) session.close();
    }, this.settings.idleTimeoutMs);
    this.idleTimer.unref();
  }

  /** After a timeout, check the session is alive with a PING; a session that does not answer is replaced. */
  private checkAlive(session: H2Connection): void {
    if (session.closed || this.pinging.has(session)) return;
    this.pinging.add(session);
    const timer = setTimeout(() => {
      if (this.session === session) this.session = undefined;
      session.destroy(new PushNetworkError(`${this.origin} stopped answering PING`, 'RESET', true, true, this.origin));
    }, this.settings.connectTimeoutMs);
    const sent = session.ping(() => {
      clearTimeout(timer);
      this.pinging.delete(session);
    });
    if (!sent) {
      clearTimeout(timer);
      this.pinging.delete(session);
    }
  }

  private failQueued(error: PushNetworkError): void {
    while (this.queued > 0) this.shift().reject(error);
    this.onIdle();
  }

  // --- connection setup ---------------------------------------------------------------------------------

  private connect(): void {
    this.connecting = true;
    // TLS offers both protocols by ALPN; an h2 socket becomes the session's transport. Plain http: is
    // HTTP/2 with prior knowledge here (http1 origins never connect through this path).
    const socket = this.secure
      ? tls.connect({
          host: this.hostname,
          port: this.port,
          servername: net.isIP(this.hostname) === 0 ? this.hostname : '',
          ALPNProtocols: ['h2', 'http/1.1'],
          ca: this.settings.ca,
          rejectUnauthorized: this.settings.rejectUnauthorized,
        })
      : net.connect({ host: this.hostname, port: this.port });
    // Requests are small and written once per event-loop turn: Nagle would only delay them.
    socket.setNoDelay(true);
    this.probe = socket;
    const timer = setTimeout(() => {
      socket.destroy(
        new PushNetworkError(`connecting to ${this.origin} timed out`, 'CONNECT', true, false, this.origin),
      );
    }, this.settings.connectTimeoutMs);
    const onError = (err: Error): void => {
      clearTimeout(timer);
      this.probe = undefined;
      this.connecting = false;
      this.failQueued(connectError(this.origin, err));
    };
    socket.once('error', onError);
    socket.once(this.secure ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer);
      this.probe = undefined;
      socket.off('error', onError);
      if (this.closed) {
        socket.destroy();
        return;
      }
      if (!this.secure || (socket as tls.TLSSocket).alpnProtocol === 'h2') {
        this.protocol = 'h2';
        this.openSession(socket);
      } else {
        // The peer does not speak HTTP/2: remember it for the pool's lifetime and use keep-alive HTTP/1.1.
        socket.destroy();
        this.protocol = 'http1';
        this.connecting = false;
        this.pump();
      }
    });
  }

  private openSession(socket: net.Socket): void {
    let connected = false;
    const retire = (): void => {
      if (this.session === session) this.session = undefined;
    };
    const session: H2Connection = new H2Connection(socket, this.authority, this.secure ? 'https' : 'http', {
      onReady: () => {
        clearTimeout(timer);
        connected = true;
        this.connecting = false;
        if (this.closed) {
          session.close();
          return;
        }
        this.session = session;
        this.pump();
      },
      onStreamLimit: () => {
        if (this.session === session) this.pump();
      },
      // After GOAWAY, streams already accepted finish on this session; new ones go to a new session.
      onGoaway: retire,
      onClose: (error) => {
        clearTimeout(timer);
        this.sessions.delete(session);
        retire();
        if (!connected) {
          this.connecting = false;
          this.failQueued(connectError(this.origin, error ?? new Error('session closed before connecting')));
        } else {
          this.pump(); // queued work opens a fresh session
        }
        if (this.idle) this.onIdle();
      },
    });
    this.sessionsOpened++;
    this.sessions.add(session);
    // Until the peer's SETTINGS arrive the session is not ready: that is part of connecting.
    const timer = setTimeout(() => {
      session.destroy(new PushNetworkError(`connecting to ${this.origin} timed out`, 'CONNECT', true, false, this.origin));
    }, this.settings.connectTimeoutMs);
  }

  // --- dispatch -----------------------------------------------------------------------------------------

  private dispatchH2(session: H2Connection, task: Task): void {
    const { request } = task;
    const fields: Array<[string, string]> = [
      ['ttl', String(request.ttl)],
      ['content-encoding', 'aes128gcm'],
      ['content-type', 'application/octet-stream'],
      ['content-length', String(request.body.length)],
      ['authorization', request.vapidAuthorization],
    ];
    if (request.urgency !== undefined) fields.push(['urgency', request.urgency]);
    if (request.topic !== undefined) fields.push(['topic', request.topic]);

    let status = 0;
    let retryAfter: string | undefined;
    let location: string | undefined;
    let chunks: Buffer[] | undefined;
    let bodyBytes = 0;
    let settled = false;
    const handlers: StreamHandlers = {
      onResponse(code, headers) {
        status = code;
        for (const [name, value] of headers) {
          if (name === 'retry-after') retryAfter ??= value;
          else if (name === 'location') location ??= value;
        }
        if (status < 200 || status >= 300) chunks = [];
      },
      onData(chunk) {
        if (chunks !== undefined && bodyBytes < MAX_ERROR_BODY) {
          chunks.push(chunk);
          bodyBytes += chunk.length;
        }
      },
      onClose: (code, error) => {
        if (settled) return;
        settled = true;
        if (status !== 0) {
          task.resolve(this.response(task, status, retryAfter, location, chunks));
        } else if (code === H2_REFUSED_STREAM && task.refusals < MAX_REFUSALS) {
          // RFC 9113 section 8.7: a refused stream was not processed; sending it again is safe.
          task.refusals++;
          this.requeueFirst(task);
        } else if (code === H2_REFUSED_STREAM) {
          task.reject(
            new PushNetworkError(`${this.origin} refused the stream ${task.refusals + 1} times`, 'REFUSED', true, false, this.origin),
          );
        } else {
          task.reject(requestError(this.origin, error ?? (code === H2_NO_ERROR ? undefined : new Error(`stream reset by the peer (HTTP/2 error ${code})`))));
        }
        this.done(deadline);
      },
    };

    let id: number;
    try {
      id = session.request(task.path, fields, request.body, handlers);
    } catch (err) {
      if (!session.draining) {
        task.reject(new TypeError(`invalid request: ${describe(err)}`));
        return;
      }
      // The session is draining or gone (e.g. a GOAWAY raced us): nothing was sent; try a new session.
      if (this.session === session) this.session = undefined;
      this.requeueFirst(task);
      return;
    }
    this.inFlight++;
    const deadline = this.track(() => {
      if (settled) return;
      settled = true;
      session.cancel(id);
      task.reject(this.timeout());
      this.done(deadline);
      this.checkAlive(session);
    });
  }

  private ensureAgent(): http.Agent {
    if (this.agent === undefined) {
      const options = {
        keepAlive: true,
        maxSockets: this.settings.http1MaxSockets,
        maxFreeSockets: this.settings.http1MaxSockets,
        timeout: this.settings.idleTimeoutMs,
        scheduling: 'lifo' as const,
      };
      this.agent = this.secure
        ? new https.Agent({ ...options, ca: this.settings.ca, rejectUnauthorized: this.settings.rejectUnauthorized })
        : new http.Agent(options);
    }
    return this.agent;
  }

  private dispatchHttp1(task: Task): void {
    const { request } = task;
    const headers: http.OutgoingHttpHeaders = {
      TTL: String(request.ttl),
      'Content-Encoding': 'aes128gcm',
      'Content-Type': 'application/octet-stream',
      'Content-Length': String(request.body.length),
      Authorization: request.vapidAuthorization,
    };
    if (request.urgency !== undefined) headers['Urgency'] = request.urgency;
    if (request.topic !== undefined) headers['Topic'] = request.topic;

    let req: http.ClientRequest;
    try {
      req = (this.secure ? https : http).request({
        host: this.hostname,
        port: this.port,
        path: task.path,
        method: 'POST',
        headers,
        agent: this.ensureAgent(),
      });
    } catch (err) {
      task.reject(new TypeError(`invalid request: ${describe(err)}`));
      return;
    }
    this.inFlight++;

    let finished = false;
    let timedOut = false;
    let gotResponse = false;
    const deadline = this.track(() => {
      timedOut = true;
      req.destroy();
    });
    const finish = (outcome: PushResponse | Error | 'retry'): void => {
      if (finished) return;
      finished = true;
      if (outcome === 'retry') this.requeueFirst(task);
      else if (outcome instanceof Error) task.reject(outcome);
      else task.resolve(outcome);
      this.done(deadline);
    };

    req.on('response', (res) => {
      gotResponse = true;
      const status = res.statusCode ?? 0;
      const chunks: Buffer[] | undefined = status < 200 || status >= 300 ? [] : undefined;
      let bodyBytes = 0;
      res.on('data', (chunk: Buffer) => {
        if (chunks !== undefined && bodyBytes < MAX_ERROR_BODY) {
          chunks.push(chunk);
          bodyBytes += chunk.length;
        }
      });
      const complete = (): void =>
        finish(this.response(task, status, header(res.headers['retry-after']), header(res.headers.location), chunks));
      res.on('end', complete);
      res.on('error', complete); // the status is known; a truncated error body does not matter
      res.on('close', complete);
    });
    req.on('error', (err) => {
      if (gotResponse) return;
      if (timedOut) finish(this.timeout());
      // A keep-alive socket the server closed just as we reused it: documented Node.js race; resend once.
      else if (req.reusedSocket && errorCode(err) === 'ECONNRESET' && task.refusals === 0) {
        task.refusals++;
        finish('retry');
      } else finish(requestError(this.origin, err));
    });
    req.on('close', () => {
      if (!gotResponse) finish(timedOut ? this.timeout() : requestError(this.origin, undefined));
    });
    req.end(request.body);
  }

  private response(
    task: Task,
    status: number,
    retryAfter: string | undefined,
    location: string | undefined,
    chunks: Buffer[] | undefined,
  ): PushResponse {
    const headers: PushResponse['headers'] = {};
    if (retryAfter !== undefined) headers['retry-after'] = retryAfter;
    if (location !== undefined) headers.location = location;
    const response: PushResponse = { status, headers, durationMs: performance.now() - task.startedAt };
    if (chunks !== undefined) response.body = Buffer.concat(chunks).subarray(0, MAX_ERROR_BODY).toString('utf8');
    return response;
  }

  private timeout(): PushNetworkError {
    return new PushNetworkError(
      `no response from ${this.origin} within ${this.settings.requestTimeoutMs} ms`,
      'TIMEOUT',
      true,
      true,
      this.origin,
    );
  }

  /** Rejects what is queued, lets in-flight streams finish (or kills them when `force`), closes transports. */
  async shutdown(force: boolean): Promise<void> {
    this.closed = true;
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    this.failQueued(new PushNetworkError('push client closed', 'CLOSED', true, false, this.origin));
    this.session = undefined;
    this.probe?.destroy();
    const sessions = [...this.sessions];
    for (const session of sessions) {
      if (force) session.destroy(new PushNetworkError('push client closed', 'CLOSED', true, true, this.origin));
      else session.close();
    }
    await Promise.all(sessions.map((session) => session.done));
    clearTimeout(this.deadlineTimer); // nothing is in flight any more
    this.deadlineTimer = undefined;
    this.agent?.destroy();
  }
}

/** Sends push requests over pooled HTTP/2 sessions (HTTP/1.1 where the push service lacks h2). */
export class PushClient {
  readonly #settings: Settings;
  readonly #maxOrigins: number;
  readonly #pools = new Map<string, OriginPool>();
  readonly #idleWaiters: Array<() => void> = [];
  #closing = false;

  constructor(options: PushClientOptions = {}) {
    const positive = (name: string, value: number | undefined, fallback: number): number => {
      const v = value ?? fallback;
      if (!Number.isInteger(v) || v < 1) throw new RangeError(`${name} must be a positive integer`);
      return v;
    };
    this.#settings = {
      maxStreams: positive('maxConcurrentStreams', options.maxConcurrentStreams, 100),
      maxQueued: positive('maxQueuedPerOrigin', options.maxQueuedPerOrigin, 10_000),
      requestTimeoutMs: positive('requestTimeoutMs', options.requestTimeoutMs, 30_000),
      connectTimeoutMs: positive('connectTimeoutMs', options.connectTimeoutMs, 10_000),
      idleTimeoutMs: positive('idleTimeoutMs', options.idleTimeoutMs, 120_000),
      http1MaxSockets: positive('http1MaxSockets', options.http1MaxSockets, 32),
      plaintext: options.plaintext ?? 'refuse',
      ca: options.tls?.ca,
      rejectUnauthorized: options.tls?.rejectUnauthorized ?? true,
    };
    this.#maxOrigins = positive('maxOrigins', options.maxOrigins, 1_000);
  }

  /** Sends one push request. Resolves with the push service's answer (any status); rejects on network failure. */
  send(request: PushRequest): Promise<PushResponse> {
    const startedAt = performance.now();
    if (this.#closing) {
      return Promise.reject(new PushNetworkError('push client closed', 'CLOSED', true, false, ''));
    }
    let url: URL;
    try {
      url = validate(request);
    } catch (err) {
      return Promise.reject(err);
    }
    if (url.protocol === 'http:' && this.#settings.plaintext === 'refuse') {
      return Promise.reject(new TypeError(`plain http: endpoints are refused (set plaintext: 'h2c' | 'http1' for test peers): ${url.origin}`));
    }
    const pool = this.#pool(url);
    return new Promise<PushResponse>((resolve, reject) => {
      pool.enqueue({ request, path: url.pathname + url.search, startedAt, resolve, reject, refusals: 0, next: undefined });
    });
  }

  /** In-flight/queued/session counts for one origin (undefined if never used). */
  stats(origin: string): OriginStats | undefined {
    const pool = this.#pools.get(origin);
    if (pool === undefined) return undefined;
    return {
      protocol: pool.protocol,
      inFlight: pool.inFlight,
      queued: pool.queued,
      sessions: pool.sessions.size,
      sessionsOpened: pool.sessionsOpened,
      http1Sockets: pool.http1Sockets,
    };
  }

  /**
   * Stops accepting requests, waits for queued and in-flight ones to finish (up to `graceMs`, default 30 s),
   * then closes every session and socket. After the grace period, what is left is rejected with CLOSED.
   */
  async close(graceMs = 30_000): Promise<void> {
    this.#closing = true;
    let timer: NodeJS.Timeout | undefined;
    const drained = await Promise.race([
      this.#whenIdle().then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), graceMs);
      }),
    ]);
    clearTimeout(timer);
    await Promise.all([...this.#pools.values()].map((pool) => pool.shutdown(!drained)));
    this.#pools.clear();
  }

  #whenIdle(): Promise<void> {
    return new Promise((resolve) => {
      this.#idleWaiters.push(resolve);
      this.#checkIdle();
    });
  }

  #checkIdle(): void {
    if (this.#idleWaiters.length === 0) return;
    for (const pool of this.#pools.values()) if (!pool.idle) return;
    for (const resolve of this.#idleWaiters.splice(0)) resolve();
  }

  #pool(url: URL): OriginPool {
    const origin = url.origin;
    let pool = this.#pools.get(origin);
    if (pool === undefined) {
      if (this.#pools.size >= this.#maxOrigins) this.#evictIdle();
      pool = new OriginPool(origin, url, this.#settings, () => this.#checkIdle());
      this.#pools.set(origin, pool);
    }
    return pool;
  }

  #evictIdle(): void {
    for (const [origin, pool] of this.#pools) {
      if (this.#pools.size < this.#maxOrigins) return;
      if (pool.idle) {
        this.#pools.delete(origin);
        void pool.shutdown(false);
      }
    }
  }
}

function validate(request: PushRequest): URL {
  if (request === null || typeof request !== 'object') throw new TypeError('send() needs a request object');
  const { endpoint, body, ttl, urgency, topic, vapidAuthorization } = request;
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new TypeError(`endpoint is not a URL: ${String(endpoint)}`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new TypeError(`endpoint must be https: ${url.protocol}`);
  if (url.username !== '' || url.password !== '') throw new TypeError('endpoint must not carry credentials');
  if (!Buffer.isBuffer(body)) throw new TypeError('body must be a Buffer (the output of encrypt)');
  if (!Number.isSafeInteger(ttl) || ttl < 0) throw new RangeError(`ttl must be a non-negative integer number of seconds; got ${String(ttl)}`);
  if (urgency !== undefined && !URGENCIES.has(urgency)) {
    throw new RangeError(`urgency must be one of very-low, low, normal, high; got ${String(urgency)}`);
  }
  if (topic !== undefined && (typeof topic !== 'string' || !TOPIC.test(topic))) {
    throw new RangeError(`topic must be 1 to 32 characters of the base64url alphabet (A-Z a-z 0-9 - _); got ${JSON.stringify(topic)}`);
  }
  // Printable ASCII only: the value goes onto the wire as it is (RFC 9110 section 5.5).
  if (typeof vapidAuthorization !== 'string' || !/^[\x20-\x7e]+$/.test(vapidAuthorization)) {
    throw new TypeError('vapidAuthorization must be a single-line header value of printable ASCII ("vapid t=..., k=...")');
  }
  return url;
}
