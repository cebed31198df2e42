/**
 * A strict local push service (RFC 8030) for tests and benchmarks. See README.md for the checking
 * order, the status codes and the fault rules. This module is the server and the push handler;
 * the faces it is made of live beside it: the subscriptions it holds keys of (subscriptions.ts),
 * the protocol checks (checks.ts), what it records (recorder.ts: in full, or only counted in count
 * mode), the fault rules (faults.ts), the control API (control.ts) and the WebSocket face for real
 * browsers (websocket.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import http2, { type Http2SecureServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';

import { checkBodyHeader, checkPushHeaders, VapidVerifier } from './checks.js';
import { serveControl, type ControlledPeer } from './control.js';
import { base64url, decryptPushMessage, PushPeerError, type Aes128gcmHeader, type VapidClaims } from './crypto.js';
import { http1Exchange, http2Exchange, type Exchange } from './exchange.js';
import { FaultRules } from './faults.js';
import type { PushSubscriptionJSON } from './keypool.js';
import { Recorder } from './recorder.js';
import { SUBSCRIPTION_ID, SubscriptionStore } from './subscriptions.js';
import { testTlsMaterial } from './tls.js';
import type {
  Attempt,
  CreateSubscriptionOptions,
  CreateSubscriptionsOptions,
  FaultRule,
  PeerMode,
  PeerStats,
  PeerSubscription,
  PushPeer,
  PushPeerOptions,
  ReceivedMessage,
} from './types.js';
import { BrowserFace, type BrowserChannel, type BrowserMessage } from './websocket.js';

const JSON_HEADERS = { 'content-type': 'application/json' } as const;

const now = (): number => performance.timeOrigin + performance.now();

export async function startPushPeer(options: PushPeerOptions = {}): Promise<PushPeer> {
  const peer = new Peer(options);
  await peer.listen();
  return peer;
}

class Peer implements ControlledPeer {
  readonly mode: PeerMode;
  origin = '';
  port = 0;
  ca: string | undefined;
  cert: string | undefined;

  private readonly options: PushPeerOptions;
  private readonly host: string;
  private readonly maxBody: number;
  private readonly maxTtl: number;
  private server: Http2SecureServer | Http2Server | undefined;
  private readonly browsers: BrowserFace | undefined;
  private readonly sessions = new Set<ServerHttp2Session>();
  private readonly sockets = new Set<Socket>();
  private readonly closing = new AbortController();
  private closed = false;

  private readonly subscriptions: SubscriptionStore;
  private readonly recorder: Recorder;
  private readonly vapid: VapidVerifier;
  private readonly faults = new FaultRules();

  constructor(options: PushPeerOptions) {
    // Every push a delayMs rule holds listens on it: as many at once as the rule holds, not a leak.
    setMaxListeners(0, this.closing.signal);
    this.options = options;
    this.mode = options.mode ?? 'verify';
    if (this.mode !== 'verify' && this.mode !== 'count') throw new TypeError(`mode must be "verify" or "count", got ${String(this.mode)}`);
    this.host = options.host ?? '127.0.0.1';
    this.maxBody = options.maxBodyBytes ?? 4096;
    this.maxTtl = options.maxTtlSeconds ?? 28 * 24 * 60 * 60;
    const endpointOf = (id: string) => `${this.origin}/push/${id}`;
    if (options.webSocket === true) this.browsers = new BrowserFace(this.host, endpointOf);
    this.subscriptions = new SubscriptionStore(options, () => this.origin);
    this.recorder = new Recorder(this.mode, endpointOf);
    this.vapid = new VapidVerifier(this.mode, () => this.origin);
  }

  get acceptedCount(): number {
    return this.recorder.acceptedCount;
  }

  get poolEndpoints(): number | undefined {
    return this.options.poolEndpoints;
  }

  async listen(): Promise<void> {
    const tlsOption = this.options.tls ?? true;
    const settings = { maxConcurrentStreams: this.options.maxConcurrentStreams ?? 100 };
    const onStream = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
      void this.handle(http2Exchange(stream, headers));
    };
    let server: Http2SecureServer | Http2Server;
    if (tlsOption === false) {
      server = http2.createServer({ settings, maxSessionMemory: 64 });
      server.on('stream', onStream);
    } else {
      const material = tlsOption === true ? await testTlsMaterial() : { key: tlsOption.key, cert: tlsOption.cert, ca: tlsOption.ca };
      this.ca = material.ca ?? material.cert;
      this.cert = material.cert;
      const secure = http2.createSecureServer({ key: material.key, cert: material.cert, allowHTTP1: true, settings, maxSessionMemory: 64 });
      secure.on('stream', onStream);
      // HTTP/1.1 arrives as 'request'. Adding that listener makes node install its compatibility
      // handler for HTTP/2 streams too; remove it so HTTP/2 stays on the raw stream API above.
      secure.on('request', (req: IncomingMessage, res: ServerResponse) => {
        if (req.httpVersionMajor === 2) return;
        void this.handle(http1Exchange(req, res));
      });
      for (const listener of secure.listeners('stream')) if (listener !== onStream) secure.off('stream', listener as (...args: unknown[]) => void);
      server = secure;
    }
    server.on('session', (session: ServerHttp2Session) => {
      this.sessions.add(session);
      session.on('error', () => {});
      session.on('close', () => this.sessions.delete(session));
    });
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    server.on('sessionError', () => {});
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.options.port ?? 0, this.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.port = (server.address() as AddressInfo).port;
    const host = this.host.includes(':') ? `[${this.host}]` : this.host;
    this.origin = `${tlsOption === false ? 'http' : 'https'}://${host}:${this.port}`;
    await this.browsers?.listen(0);
  }

  async close(): Promise<void> {
    if (this.closed || !this.server) return;
    this.closed = true;
    this.closing.abort();
    const server = this.server;
    const done = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const session of this.sessions) session.destroy();
    for (const socket of this.sockets) socket.destroy();
    await Promise.all([done, this.browsers?.close()]);
  }

  // ---------------------------------------------------------------------------------------------
  // The WebSocket face

  get webSocketUrl(): string | undefined {
    return this.browsers?.url;
  }

  browserChannels(): BrowserChannel[] {
    return this.browsers?.registered() ?? [];
  }

  browserMessages(endpoint?: string): BrowserMessage[] {
    return this.browsers?.sent(endpoint) ?? [];
  }

  connectedBrowsers(): string[] {
    return this.browsers?.connectedUaids() ?? [];
  }

  browserProtocolErrors(): string[] {
    return [...(this.browsers?.protocolErrors ?? [])];
  }

  rotateUaids(): void {
    if (!this.browsers) throw new TypeError('rotateUaids needs a peer started with webSocket: true');
    this.browsers.rotateUaids();
  }

  // ---------------------------------------------------------------------------------------------
  // Subscriptions, records and faults (their own modules)

  createSubscription(options: CreateSubscriptionOptions = {}): PushSubscriptionJSON {
    return this.subscriptions.create(options);
  }

  createSubscriptions(count: number, options: CreateSubscriptionsOptions = {}): PushSubscriptionJSON[] {
    return this.subscriptions.createMany(count, options);
  }

  poolPublicKeys(): { p256dh: string; auth: string }[] {
    return this.subscriptions.poolPublicKeys();
  }

  subscriptionFor(endpoint: string): PeerSubscription | undefined {
    return this.subscriptions.describe(endpoint);
  }

  expireSubscription(endpoint: string, status: 404 | 410 = 410): void {
    this.subscriptions.expire(endpoint, status);
  }

  received(endpoint?: string, options: { readonly includeReplaced?: boolean } = {}): ReceivedMessage[] {
    return this.recorder.received(endpoint === undefined ? undefined : this.subscriptions.requireId(endpoint), options.includeReplaced === true);
  }

  acceptedCountFor(endpoint: string): number {
    return this.recorder.acceptedCountFor(this.subscriptions.requireId(endpoint));
  }

  attempts(endpoint?: string): Attempt[] {
    return this.recorder.attempts(endpoint === undefined ? undefined : this.subscriptions.requireId(endpoint));
  }

  attemptCount(endpoint: string): number {
    return this.recorder.attemptCount(this.subscriptions.requireId(endpoint));
  }

  stats(): PeerStats {
    return this.recorder.stats();
  }

  acceptedPerEndpoint(): Record<string, number> {
    return this.recorder.acceptedPerEndpoint();
  }

  reset(): void {
    this.recorder.clear();
    this.vapid.clear();
    this.faults.clear();
    this.subscriptions.clearExpiries();
    this.browsers?.reset();
  }

  respondWith(endpointOrRule: string | FaultRule | readonly FaultRule[] | null, maybeRule?: FaultRule | readonly FaultRule[] | null): void {
    if (typeof endpointOrRule === 'string') this.faults.setFor(this.subscriptions.requireId(endpointOrRule), maybeRule ?? null);
    else this.faults.setDefault(endpointOrRule);
  }

  // ---------------------------------------------------------------------------------------------
  // Requests

  private async handle(ex: Exchange): Promise<void> {
    try {
      if (ex.path.startsWith('/__peer/') && this.options.controlApi !== false) {
        await serveControl(this, ex);
        return;
      }
      if (!ex.path.startsWith('/push/')) {
        ex.respond(404, JSON_HEADERS, JSON.stringify({ error: 'not_found', message: `no resource at ${ex.path.slice(0, 100)}` }));
        return;
      }
      await this.push(ex);
    } catch (err) {
      if (this.closed) return;
      console.error('push-peer: internal error', err);
      ex.respond(500, JSON_HEADERS, JSON.stringify({ error: 'peer_internal_error', message: String(err) }));
    }
  }

  private async push(ex: Exchange): Promise<void> {
    const at = now();
    const rawId = ex.path.slice('/push/'.length);
    const id = SUBSCRIPTION_ID.test(rawId) ? rawId : undefined;
    const attempt = this.recorder.requestArrived(id, ex.method, at, ex.httpVersion);
    const reject = (status: number, code: string, message: string, headers: Record<string, string> = {}) => {
      this.recorder.rejected(attempt, status, code);
      ex.respond(status, { ...JSON_HEADERS, ...headers }, JSON.stringify({ error: code, message }));
    };

    // A browser's channel (WebSocket face) or a subscription this peer holds the keys of.
    const channel = id === undefined ? undefined : this.browsers?.channel(id);
    const sub = id === undefined || channel ? undefined : this.subscriptions.lookup(id);
    if (id === undefined || (!sub && !channel)) return reject(404, 'unknown_subscription', `no push subscription at ${ex.path.slice(0, 100)}`);
    if (ex.method !== 'POST') return reject(405, 'method_not_allowed', `${ex.method} is not allowed on a push resource; use POST`, { allow: 'POST' });
    const gone = this.subscriptions.expiredStatus(id) ?? (channel?.gone ? 410 : undefined);
    if (gone !== undefined) return reject(gone, 'subscription_expired', 'the push subscription has expired or was unsubscribed');

    let claims: VapidClaims;
    let headers;
    try {
      claims = this.vapid.verify(ex.header('authorization'));
      const restrictedTo = channel ? channel.applicationServerKey : sub?.applicationServerKey;
      if (restrictedTo !== undefined && claims.publicKey !== restrictedTo) {
        throw new PushPeerError(403, 'vapid_key_mismatch', 'the VAPID key "k" is not the applicationServerKey this subscription was created with (RFC 8292 section 4.2)');
      }
      headers = checkPushHeaders(ex, this.maxBody);
    } catch (err) {
      if (err instanceof PushPeerError) return reject(err.status, err.code, err.message, err.status === 401 ? { 'www-authenticate': 'vapid' } : {});
      throw err;
    }

    const body = await ex.readBody(this.maxBody);
    if (body.kind === 'aborted') return this.recorder.abandoned(attempt);
    if (body.kind === 'too-large') return reject(413, 'payload_too_large', `body exceeds ${this.maxBody} octets`);
    const bytes = body.bytes;
    let bodyHeader: Aes128gcmHeader;
    try {
      bodyHeader = checkBodyHeader(bytes, claims);
    } catch (err) {
      if (err instanceof PushPeerError) return reject(err.status, err.code, err.message);
      throw err;
    }

    // Faults apply to well-formed, authenticated requests, before decryption.
    const fault = this.faults.take(id);
    if (fault) {
      if (attempt) attempt.fault = fault;
      if (fault.delayMs !== undefined && fault.delayMs > 0) {
        await sleep(fault.delayMs, undefined, { signal: this.closing.signal });
        // A sender that went away while its push waited gave up on it: taken as never received,
        // since the sender cannot know of it (what happens after a 201 it never read is its own risk).
        if (ex.gone()) return this.recorder.abandoned(attempt);
      }
      if (fault.resetStream) {
        this.recorder.streamReset(attempt);
        ex.reset();
        return;
      }
      if (fault.status !== undefined) {
        const retryAfter: Record<string, string> = fault.retryAfter !== undefined ? { 'retry-after': String(fault.retryAfter) } : {};
        return reject(fault.status, 'fault', `fault injected by push-peer: ${JSON.stringify(fault)}`, retryAfter);
      }
    }

    // A browser's channel is decrypted by the browser (its ack says whether that worked).
    let decrypted;
    if (this.mode === 'verify' && sub) {
      try {
        decrypted = decryptPushMessage(bytes, sub.keys, bodyHeader);
      } catch (err) {
        if (err instanceof PushPeerError) return reject(err.status, err.code, err.message);
        throw err;
      }
    }

    const messageId = this.recorder.accept(id, attempt);
    const location = `${this.origin}/message/${messageId}`;
    const effectiveTtl = Math.min(headers.ttl, this.maxTtl);
    if (channel) this.browsers!.store(id, messageId, bytes, effectiveTtl, headers.topic, at);
    if (decrypted && attempt) {
      this.recorder.store(id, messageId, location, {
        endpoint: attempt.endpoint,
        plaintext: Buffer.from(decrypted.plaintext),
        ttl: headers.ttl,
        urgency: headers.urgency,
        topic: headers.topic,
        vapid: claims,
        at,
        httpVersion: ex.httpVersion,
        rs: decrypted.rs,
        paddingLength: decrypted.paddingLength,
        bodyLength: bytes.length,
        senderPublicKey: base64url(decrypted.senderPublicKey),
        storedUntil: at + effectiveTtl * 1000,
      });
    }
    if (fault?.delayResponseMs !== undefined && fault.delayResponseMs > 0) {
      // Accepted already: a sender gone meanwhile pushed it without learning so.
      await sleep(fault.delayResponseMs, undefined, { signal: this.closing.signal });
      if (ex.gone()) return;
    }
    ex.respond(201, { location, ttl: String(effectiveTtl) });
  }
}

