/**
 * A strict local push service (RFC 8030) for tests and benchmarks. See README.md for the checking
 * order, the status codes and the fault rules.
 */
import { createECDH, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import http2, { type Http2SecureServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';

import {
  base64url,
  bytesOf,
  decryptPushMessage,
  parseAes128gcm,
  parseVapidAuthorization,
  privateScalar,
  PushPeerError,
  receiverKeys,
  verifyVapid,
  type ReceiverKeys,
  type VapidClaims,
} from './crypto.js';
import { http1Exchange, http2Exchange, type Exchange, type HttpVersion } from './exchange.js';
import { generateKeyPool, subscriptionFromPool, validateKeyPool, type KeyPoolEntry, type PushSubscriptionJSON } from './keypool.js';
import { testTlsMaterial } from './tls.js';
import { BrowserFace, type BrowserChannel, type BrowserMessage } from './websocket.js';

export type PeerMode = 'verify' | 'count';
export type Urgency = 'very-low' | 'low' | 'normal' | 'high';

export interface PushPeerOptions {
  /**
   * `true` (default): HTTPS with HTTP/2 and an HTTP/1.1 fallback, certificate from a throwaway CA
   * (`peer.ca`). `false`: h2c with prior knowledge (HTTP/2 only). Or bring your own key/cert.
   */
  readonly tls?: boolean | { readonly key: string; readonly cert: string; readonly ca?: string };
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** Default 0 (a free port). */
  readonly port?: number;
  /** `verify` (default): full checks, decryption, recording. `count`: see README. */
  readonly mode?: PeerMode;
  /** A shared key pool for `createSubscriptions` (a size to generate, or entries, e.g. from a file). */
  readonly keyPool?: number | readonly KeyPoolEntry[];
  /**
   * Pool endpoints `/push/<index>` for index < poolEndpoints exist without `createSubscriptions`
   * (what the CLI uses: the parent derives them with `subscriptionFromPool`). `Infinity` = any index.
   */
  readonly poolEndpoints?: number;
  /** The applicationServerKey those pre-existing pool endpoints are restricted to, if any. */
  readonly poolApplicationServerKey?: string;
  /** Largest accepted body; 413 above. Default 4096 (RFC 8030 section 7.2). */
  readonly maxBodyBytes?: number;
  /** Longest TTL kept; a larger TTL is accepted and answered with this in the response TTL header. Default 28 days. */
  readonly maxTtlSeconds?: number;
  /** SETTINGS_MAX_CONCURRENT_STREAMS advertised to senders. Default 100 (what large push services advertise). */
  readonly maxConcurrentStreams?: number;
  /** Serve the `/__peer/` control API. Default true. */
  readonly controlApi?: boolean;
  /**
   * Also serve Mozilla's WebPush WebSocket protocol at `peer.webSocketUrl` (ws://, on `host`), for
   * a Firefox whose `dom.push.serverURL` points there: the channels it registers get endpoints on
   * this peer. Default false.
   */
  readonly webSocket?: boolean;
}

export interface CreateSubscriptionOptions {
  /** Restrict the subscription to this VAPID key (RFC 8292 section 4): any other `k` gets 403. */
  readonly applicationServerKey?: string | Uint8Array;
  /** Use this 32-octet P-256 private key instead of a fresh one (e.g. RFC 8291's example keys). */
  readonly privateKey?: string | Uint8Array;
  /** Use this 16-octet auth secret instead of a fresh one. */
  readonly auth?: string | Uint8Array;
}

export interface CreateSubscriptionsOptions {
  /**
   * Derive the subscriptions from a pool of this many key pairs (endpoints `/push/<index>`, keys
   * cycling). The pool is made on first use; later calls share it (a different size throws).
   * Without a pool (here or in the peer options), every subscription gets its own key pair.
   */
  readonly keyPool?: number;
  readonly applicationServerKey?: string | Uint8Array;
}

export interface PeerSubscription extends PushSubscriptionJSON {
  /** The receiver's private key (base64url), should a test want to decrypt by hand. */
  readonly privateKey: string;
  readonly applicationServerKey: string | undefined;
  /** `active`, or the status it now answers after `expireSubscription`. */
  readonly state: 'active' | 404 | 410;
  /** Pool index, for pool-derived subscriptions. */
  readonly poolIndex: number | undefined;
}

export interface ReceivedMessage {
  /** Message id; `location` is `${origin}/message/${id}`. */
  readonly id: string;
  readonly location: string;
  readonly endpoint: string;
  readonly plaintext: Buffer;
  /** The TTL header as sent (seconds). */
  readonly ttl: number;
  /** The Urgency header as sent; `undefined` when absent (which means `normal`). */
  readonly urgency: Urgency | undefined;
  readonly topic: string | undefined;
  readonly vapid: VapidClaims;
  /** Arrival time of the request, epoch milliseconds (fractional, monotonic within the process). */
  readonly at: number;
  readonly httpVersion: HttpVersion;
  /** aes128gcm record size parameter, padding octets after the delimiter, and the body length. */
  readonly rs: number;
  readonly paddingLength: number;
  readonly bodyLength: number;
  /** The sender's ephemeral ECDH key (keyid), base64url. */
  readonly senderPublicKey: string;
  /** Id of the still-stored message with the same Topic that this one replaced. */
  readonly replaces: string | undefined;
  /** Id of the later message that replaced this one (only seen with `includeReplaced`). */
  readonly replacedBy: string | undefined;
}

export interface Attempt {
  readonly endpoint: string;
  readonly method: string;
  /** Arrival time, epoch milliseconds (fractional, monotonic within the process). */
  readonly at: number;
  readonly httpVersion: HttpVersion;
  /** What the peer answered; `reset` for a reset stream/connection, `aborted` if the sender gave up first, 0 while pending. */
  readonly status: number | 'reset' | 'aborted';
  /** The rejection code (e.g. `missing_ttl`), when rejected by a check. */
  readonly error: string | undefined;
  /** The fault rule that decided the answer, if one did. */
  readonly fault: FaultRule | undefined;
}

export interface FaultRule {
  /** Answer with this status (400-599) instead of accepting. */
  readonly status?: number;
  /** Send `Retry-After` with this (seconds, or an HTTP-date string). */
  readonly retryAfter?: number | string;
  /** Wait this long before answering (alone: then process normally). */
  readonly delayMs?: number;
  /** Reset the HTTP/2 stream (RST_STREAM INTERNAL_ERROR) or destroy the HTTP/1.1 connection. */
  readonly resetStream?: boolean;
  /** Apply to the next `times` requests only, then fall back (to the next rule, the default rule, or normal). */
  readonly times?: number;
}

export interface PeerStats {
  readonly mode: PeerMode;
  /** Requests to `/push/...` paths (all methods, all outcomes). */
  readonly requests: number;
  /** 201 responses. */
  readonly accepted: number;
  /** Accepted messages still listed after Topic replacement (equals `accepted` in count mode). */
  readonly stored: number;
  readonly replaced: number;
  readonly resets: number;
  readonly aborted: number;
  /** Answers by status code. */
  readonly byStatus: Readonly<Record<string, number>>;
  /** Rejections by code (`missing_ttl`, `bad_signature`, `fault`, ...). */
  readonly errors: Readonly<Record<string, number>>;
  /** Distinct endpoints with at least one 201. */
  readonly endpoints: number;
  /** `{ "<n>": endpoints that got exactly n 201s }`. */
  readonly acceptedHistogram: Readonly<Record<string, number>>;
}

export interface PushPeer {
  /** `https://127.0.0.1:PORT` (TLS) or `http://127.0.0.1:PORT` (h2c): the `aud` VAPID tokens must carry. */
  readonly origin: string;
  /** The CA certificate (PEM) to trust; `undefined` for h2c. */
  readonly ca: string | undefined;
  /** The server certificate (PEM); `undefined` for h2c. */
  readonly cert: string | undefined;
  readonly mode: PeerMode;
  readonly port: number;
  /** Every 201 so far (Topic replacement does not subtract). */
  readonly acceptedCount: number;
  /** `ws://127.0.0.1:PORT/` with the `webSocket` option (Firefox's dom.push.serverURL), else undefined. */
  readonly webSocketUrl: string | undefined;
  /** The channels browsers registered over the WebSocket face. */
  browserChannels(): BrowserChannel[];
  /** Pushes accepted for browser channels (for one endpoint, or all), with the browser's acks. */
  browserMessages(endpoint?: string): BrowserMessage[];
  /** The UAIDs of the browsers connected to the WebSocket face now. */
  connectedBrowsers(): string[];
  /** What browsers did against the WebSocket protocol (each closed their connection). */
  browserProtocolErrors(): string[];
  /** The next hello of every browser gets a new UAID (Firefox then renews every subscription). */
  rotateUaids(): void;
  createSubscription(options?: CreateSubscriptionOptions): PushSubscriptionJSON;
  createSubscriptions(count: number, options?: CreateSubscriptionsOptions): PushSubscriptionJSON[];
  subscriptionFor(endpoint: string): PeerSubscription | undefined;
  /** From now on the endpoint answers `status` (410 Gone by default, or 404) to every POST. */
  expireSubscription(endpoint: string, status?: 404 | 410): void;
  /** Accepted messages in arrival order, minus those replaced by Topic (unless `includeReplaced`). Empty in count mode. */
  received(endpoint?: string, options?: { readonly includeReplaced?: boolean }): ReceivedMessage[];
  /** 201s for one endpoint (both modes). */
  acceptedCountFor(endpoint: string): number;
  /** Every request to `/push/...` (for one endpoint, or all), in arrival order. Empty in count mode. */
  attempts(endpoint?: string): Attempt[];
  /** Number of requests to an endpoint (both modes). */
  attemptCount(endpoint: string): number;
  /** Fault rule(s) for every endpoint without its own (`null` clears). A list is applied in order. */
  respondWith(rule: FaultRule | readonly FaultRule[] | null): void;
  /** Fault rule(s) for one endpoint (`null` clears). A list is applied in order. */
  respondWith(endpoint: string, rule: FaultRule | readonly FaultRule[] | null): void;
  stats(): PeerStats;
  /** Forgets messages, attempts, counters, fault rules and expiries; keeps subscriptions. */
  reset(): void;
  close(): Promise<void>;
}

interface Subscription {
  readonly id: string;
  readonly keys: ReceiverKeys;
  readonly entry: KeyPoolEntry;
  readonly applicationServerKey: string | undefined;
  readonly poolIndex: number | undefined;
}

interface MutableMessage extends Omit<ReceivedMessage, 'replacedBy'> {
  replacedBy: string | undefined;
  readonly subscriptionId: string;
  readonly storedUntil: number;
}

interface MutableAttempt extends Omit<Attempt, 'status' | 'error' | 'fault'> {
  status: Attempt['status'];
  error: string | undefined;
  fault: FaultRule | undefined;
}

interface QueuedRule {
  readonly rule: FaultRule;
  remaining: number | undefined;
}

interface PoolRange {
  readonly start: number;
  readonly end: number;
  readonly applicationServerKey: string | undefined;
}

interface PoolKeys {
  readonly entry: KeyPoolEntry;
  readonly keys: ReceiverKeys;
}

interface CachedVapid {
  readonly claims: VapidClaims;
  readonly expMs: number;
}

const URGENCIES: ReadonlySet<string> = new Set<Urgency>(['very-low', 'low', 'normal', 'high']);
const TOPIC = /^[A-Za-z0-9_-]{1,32}$/;
const TTL = /^[0-9]+$/;
const POOL_ID = /^(?:0|[1-9][0-9]{0,14})$/;
const SUBSCRIPTION_ID = /^[A-Za-z0-9_-]{1,128}$/;
const JSON_HEADERS = { 'content-type': 'application/json' } as const;

const now = (): number => performance.timeOrigin + performance.now();

function validateRule(rule: FaultRule, last: boolean): FaultRule {
  if (typeof rule !== 'object' || rule === null) throw new TypeError('fault rule must be an object');
  const { status, retryAfter, delayMs, resetStream, times } = rule;
  if (status !== undefined && (!Number.isInteger(status) || status < 400 || status > 599)) throw new TypeError(`fault status must be an integer 400-599, got ${status}`);
  if (delayMs !== undefined && (!Number.isFinite(delayMs) || delayMs < 0)) throw new TypeError(`delayMs must be a non-negative number, got ${delayMs}`);
  if (times !== undefined && (!Number.isInteger(times) || times < 1)) throw new TypeError(`times must be a positive integer, got ${times}`);
  if (resetStream !== undefined && typeof resetStream !== 'boolean') throw new TypeError('resetStream must be a boolean');
  if (resetStream && status !== undefined) throw new TypeError('a fault rule cannot both reset the stream and answer a status');
  if (status === undefined && !resetStream && delayMs === undefined) throw new TypeError('a fault rule needs status, resetStream or delayMs');
  if (retryAfter !== undefined) {
    if (status === undefined) throw new TypeError('retryAfter needs a status');
    if (typeof retryAfter === 'number' ? !Number.isInteger(retryAfter) || retryAfter < 0 : typeof retryAfter !== 'string' || retryAfter === '') {
      throw new TypeError(`retryAfter must be a non-negative integer (seconds) or an HTTP-date, got ${String(retryAfter)}`);
    }
  }
  if (!last && times === undefined) throw new TypeError('in a list of fault rules, every rule but the last needs `times`');
  return { ...rule };
}

function increment(record: Record<string, number>, key: string): void {
  record[key] = (record[key] ?? 0) + 1;
}

export async function startPushPeer(options: PushPeerOptions = {}): Promise<PushPeer> {
  const peer = new Peer(options);
  await peer.listen();
  return peer;
}

class Peer implements PushPeer {
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

  // Subscriptions
  private readonly individual = new Map<string, Subscription>();
  private pool: PoolKeys[] | undefined;
  private readonly poolRanges: PoolRange[] = [];
  private poolNext = 0;
  private readonly expired = new Map<string, 404 | 410>();

  // Recording
  private messages: MutableMessage[] = [];
  private messagesById = new Map<string, MutableMessage[]>();
  private topics = new Map<string, Map<string, MutableMessage>>();
  private attemptList: MutableAttempt[] = [];
  private attemptsById = new Map<string, MutableAttempt[]>();
  private attemptCounts = new Map<string, number>();
  private acceptedById = new Map<string, number>();
  private accepted = 0;
  private replaced = 0;
  private requests = 0;
  private resets = 0;
  private aborted = 0;
  private byStatus: Record<string, number> = {};
  private errors: Record<string, number> = {};
  private messageCounter = 0;
  private readonly messagePrefix = randomBytes(4).toString('hex');
  private vapidCache = new Map<string, CachedVapid>();

  // Faults
  private rules = new Map<string, QueuedRule[]>();
  private defaultRules: QueuedRule[] = [];

  constructor(options: PushPeerOptions) {
    // Every push a delayMs rule holds listens on it: as many at once as the rule holds, not a leak.
    setMaxListeners(0, this.closing.signal);
    this.options = options;
    this.mode = options.mode ?? 'verify';
    if (this.mode !== 'verify' && this.mode !== 'count') throw new TypeError(`mode must be "verify" or "count", got ${String(this.mode)}`);
    this.host = options.host ?? '127.0.0.1';
    this.maxBody = options.maxBodyBytes ?? 4096;
    this.maxTtl = options.maxTtlSeconds ?? 28 * 24 * 60 * 60;
    if (options.webSocket === true) this.browsers = new BrowserFace(this.host, (id) => `${this.origin}/push/${id}`);
    if (options.keyPool !== undefined) this.setPool(typeof options.keyPool === 'number' ? generateKeyPool(options.keyPool) : validateKeyPool(options.keyPool));
    if (options.poolEndpoints !== undefined) {
      if (!this.pool) throw new TypeError('poolEndpoints needs keyPool');
      if (!(options.poolEndpoints >= 0)) throw new TypeError('poolEndpoints must be >= 0');
    }
    if (options.poolApplicationServerKey !== undefined) bytesOf(options.poolApplicationServerKey, 'poolApplicationServerKey', 65);
  }

  get acceptedCount(): number {
    return this.accepted;
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
  // Subscriptions

  private setPool(entries: readonly KeyPoolEntry[]): void {
    this.pool = entries.map((entry) => ({ entry, keys: receiverKeys(bytesOf(entry.privateKey, 'privateKey', 32), bytesOf(entry.auth, 'auth', 16)) }));
  }

  createSubscription(options: CreateSubscriptionOptions = {}): PushSubscriptionJSON {
    const privateKey = options.privateKey !== undefined ? bytesOf(options.privateKey, 'privateKey', 32) : undefined;
    const auth = options.auth !== undefined ? bytesOf(options.auth, 'auth', 16) : randomBytes(16);
    const applicationServerKey = options.applicationServerKey !== undefined ? base64url(bytesOf(options.applicationServerKey, 'applicationServerKey', 65)) : undefined;
    let keys: ReceiverKeys;
    if (privateKey) {
      keys = receiverKeys(privateKey, auth);
    } else {
      const ecdh = createECDH('prime256v1');
      keys = { ecdh, publicKey: ecdh.generateKeys(), authSecret: auth };
    }
    const entry: KeyPoolEntry = { privateKey: base64url(privateScalar(keys.ecdh)), p256dh: base64url(keys.publicKey), auth: base64url(auth) };
    const id = `u${randomBytes(12).toString('base64url')}`;
    this.individual.set(id, { id, keys, entry, applicationServerKey, poolIndex: undefined });
    return { endpoint: `${this.origin}/push/${id}`, expirationTime: null, keys: { p256dh: entry.p256dh, auth: entry.auth } };
  }

  createSubscriptions(count: number, options: CreateSubscriptionsOptions = {}): PushSubscriptionJSON[] {
    if (!Number.isInteger(count) || count < 0) throw new RangeError(`count must be a non-negative integer, got ${count}`);
    if (options.keyPool !== undefined) {
      if (!this.pool) this.setPool(generateKeyPool(options.keyPool));
      else if (this.pool.length !== options.keyPool) throw new RangeError(`this peer already has a key pool of ${this.pool.length} (asked for ${options.keyPool})`);
    }
    if (!this.pool) return Array.from({ length: count }, () => this.createSubscription(options.applicationServerKey !== undefined ? { applicationServerKey: options.applicationServerKey } : {}));
    const applicationServerKey = options.applicationServerKey !== undefined ? base64url(bytesOf(options.applicationServerKey, 'applicationServerKey', 65)) : undefined;
    const start = this.poolNext;
    this.poolNext += count;
    if (count > 0) this.poolRanges.push({ start, end: start + count, applicationServerKey });
    const pool = this.pool.map((p) => p.entry);
    const out = new Array<PushSubscriptionJSON>(count);
    for (let i = 0; i < count; i++) out[i] = subscriptionFromPool(this.origin, pool, start + i);
    return out;
  }

  /** The public half of the key pool (what `/__peer/key-pool` serves). */
  poolPublicKeys(): { p256dh: string; auth: string }[] {
    return (this.pool ?? []).map(({ entry }) => ({ p256dh: entry.p256dh, auth: entry.auth }));
  }

  private idOf(endpoint: string): string | undefined {
    let path = endpoint;
    if (!endpoint.startsWith('/')) {
      if (!endpoint.startsWith(`${this.origin}/`)) return undefined;
      path = endpoint.slice(this.origin.length);
    }
    if (!path.startsWith('/push/')) return undefined;
    const id = path.slice('/push/'.length);
    return SUBSCRIPTION_ID.test(id) ? id : undefined;
  }

  private requireId(endpoint: string): string {
    const id = this.idOf(endpoint);
    if (id === undefined) throw new TypeError(`${endpoint} is not an endpoint of this peer (${this.origin}/push/<id>)`);
    return id;
  }

  private lookup(id: string): Subscription | undefined {
    const individual = this.individual.get(id);
    if (individual) return individual;
    if (!this.pool || !POOL_ID.test(id)) return undefined;
    const index = Number(id);
    let range: PoolRange | undefined;
    if (index < this.poolNext) {
      // Ranges are contiguous from 0 and sorted: binary search.
      let lo = 0;
      let hi = this.poolRanges.length - 1;
      while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        const r = this.poolRanges[mid]!;
        if (index < r.start) hi = mid - 1;
        else if (index >= r.end) lo = mid + 1;
        else {
          range = r;
          break;
        }
      }
    } else if (this.options.poolEndpoints !== undefined && index < this.options.poolEndpoints) {
      range = { start: 0, end: Infinity, applicationServerKey: this.options.poolApplicationServerKey };
    }
    if (!range) return undefined;
    const { entry, keys } = this.pool[index % this.pool.length]!;
    return { id, keys, entry, applicationServerKey: range.applicationServerKey, poolIndex: index };
  }

  subscriptionFor(endpoint: string): PeerSubscription | undefined {
    const id = this.idOf(endpoint);
    const sub = id === undefined ? undefined : this.lookup(id);
    if (!sub || id === undefined) return undefined;
    return {
      endpoint: `${this.origin}/push/${id}`,
      expirationTime: null,
      keys: { p256dh: sub.entry.p256dh, auth: sub.entry.auth },
      privateKey: sub.entry.privateKey,
      applicationServerKey: sub.applicationServerKey,
      state: this.expired.get(id) ?? 'active',
      poolIndex: sub.poolIndex,
    };
  }

  expireSubscription(endpoint: string, status: 404 | 410 = 410): void {
    const id = this.requireId(endpoint);
    if (!this.lookup(id)) throw new TypeError(`${endpoint} is not a subscription of this peer`);
    if (status !== 404 && status !== 410) throw new TypeError('an expired subscription answers 404 or 410');
    this.expired.set(id, status);
  }

  // ---------------------------------------------------------------------------------------------
  // Recording

  received(endpoint?: string, options: { readonly includeReplaced?: boolean } = {}): ReceivedMessage[] {
    const list = endpoint === undefined ? this.messages : (this.messagesById.get(this.requireId(endpoint)) ?? []);
    return list.filter((m) => options.includeReplaced === true || m.replacedBy === undefined).map(publicMessage);
  }

  acceptedCountFor(endpoint: string): number {
    return this.acceptedById.get(this.requireId(endpoint)) ?? 0;
  }

  attempts(endpoint?: string): Attempt[] {
    const list = endpoint === undefined ? this.attemptList : (this.attemptsById.get(this.requireId(endpoint)) ?? []);
    return list.map((a) => ({ ...a }));
  }

  attemptCount(endpoint: string): number {
    return this.attemptCounts.get(this.requireId(endpoint)) ?? 0;
  }

  stats(): PeerStats {
    const histogram: Record<string, number> = {};
    for (const n of this.acceptedById.values()) increment(histogram, String(n));
    return {
      mode: this.mode,
      requests: this.requests,
      accepted: this.accepted,
      stored: this.accepted - this.replaced,
      replaced: this.replaced,
      resets: this.resets,
      aborted: this.aborted,
      byStatus: { ...this.byStatus },
      errors: { ...this.errors },
      endpoints: this.acceptedById.size,
      acceptedHistogram: histogram,
    };
  }

  /** Per-endpoint 201 counts (for `/__peer/stats?perEndpoint=1`). */
  acceptedPerEndpoint(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [id, n] of this.acceptedById) out[`${this.origin}/push/${id}`] = n;
    return out;
  }

  reset(): void {
    this.messages = [];
    this.messagesById = new Map();
    this.topics = new Map();
    this.attemptList = [];
    this.attemptsById = new Map();
    this.attemptCounts = new Map();
    this.acceptedById = new Map();
    this.accepted = 0;
    this.replaced = 0;
    this.requests = 0;
    this.resets = 0;
    this.aborted = 0;
    this.byStatus = {};
    this.errors = {};
    this.vapidCache = new Map();
    this.rules = new Map();
    this.defaultRules = [];
    this.expired.clear();
    this.browsers?.reset();
  }

  // ---------------------------------------------------------------------------------------------
  // Faults

  respondWith(endpointOrRule: string | FaultRule | readonly FaultRule[] | null, maybeRule?: FaultRule | readonly FaultRule[] | null): void {
    if (typeof endpointOrRule === 'string') {
      const id = this.requireId(endpointOrRule);
      const queue = this.queueOf(maybeRule ?? null);
      if (queue.length === 0) this.rules.delete(id);
      else this.rules.set(id, queue);
    } else {
      this.defaultRules = this.queueOf(endpointOrRule);
    }
  }

  private queueOf(rule: FaultRule | readonly FaultRule[] | null): QueuedRule[] {
    if (rule === null) return [];
    const list: readonly FaultRule[] = Array.isArray(rule) ? (rule as readonly FaultRule[]) : [rule as FaultRule];
    return list.map((r, i) => {
      const valid = validateRule(r, i === list.length - 1);
      return { rule: valid, remaining: valid.times };
    });
  }

  private takeRule(id: string): FaultRule | undefined {
    const own = this.rules.get(id);
    const queue = own && own.length > 0 ? own : this.defaultRules;
    const head = queue[0];
    if (!head) return undefined;
    if (head.remaining !== undefined && --head.remaining === 0) {
      queue.shift();
      if (own && own.length === 0) this.rules.delete(id);
    }
    return head.rule;
  }

  // ---------------------------------------------------------------------------------------------
  // Requests

  private async handle(ex: Exchange): Promise<void> {
    try {
      if (ex.path.startsWith('/__peer/') && this.options.controlApi !== false) {
        await this.control(ex);
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
    this.requests++;
    const rawId = ex.path.slice('/push/'.length);
    const id = SUBSCRIPTION_ID.test(rawId) ? rawId : undefined;
    const verifyMode = this.mode === 'verify';
    let attempt: MutableAttempt | undefined;
    if (id !== undefined) {
      this.attemptCounts.set(id, (this.attemptCounts.get(id) ?? 0) + 1);
      if (verifyMode) {
        attempt = { endpoint: `${this.origin}/push/${id}`, method: ex.method, at, httpVersion: ex.httpVersion, status: 0, error: undefined, fault: undefined };
        this.attemptList.push(attempt);
        const list = this.attemptsById.get(id);
        if (list) list.push(attempt);
        else this.attemptsById.set(id, [attempt]);
      }
    }
    const reject = (status: number, code: string, message: string, headers: Record<string, string> = {}) => {
      increment(this.byStatus, String(status));
      increment(this.errors, code);
      if (attempt) {
        attempt.status = status;
        attempt.error = code;
      }
      ex.respond(status, { ...JSON_HEADERS, ...headers }, JSON.stringify({ error: code, message }));
    };

    // A browser's channel (WebSocket face) or a subscription this peer holds the keys of.
    const channel = id === undefined ? undefined : this.browsers?.channel(id);
    const sub = id === undefined || channel ? undefined : this.lookup(id);
    if (id === undefined || (!sub && !channel)) return reject(404, 'unknown_subscription', `no push subscription at ${ex.path.slice(0, 100)}`);
    if (ex.method !== 'POST') return reject(405, 'method_not_allowed', `${ex.method} is not allowed on a push resource; use POST`, { allow: 'POST' });
    const gone = this.expired.get(id) ?? (channel?.gone ? 410 : undefined);
    if (gone !== undefined) return reject(gone, 'subscription_expired', 'the push subscription has expired or was unsubscribed');

    // RFC 8292: vapid authentication.
    let claims: VapidClaims;
    try {
      claims = this.authenticate(ex.header('authorization'));
    } catch (err) {
      if (err instanceof PushPeerError) return reject(err.status, err.code, err.message, err.status === 401 ? { 'www-authenticate': 'vapid' } : {});
      throw err;
    }
    const restrictedTo = channel ? channel.applicationServerKey : sub?.applicationServerKey;
    if (restrictedTo !== undefined && claims.publicKey !== restrictedTo) {
      return reject(403, 'vapid_key_mismatch', 'the VAPID key "k" is not the applicationServerKey this subscription was created with (RFC 8292 section 4.2)');
    }

    // RFC 8030 headers.
    const ttlHeader = ex.header('ttl');
    if (ttlHeader === undefined) return reject(400, 'missing_ttl', 'the TTL header is required (RFC 8030 section 5.2)');
    if (!TTL.test(ttlHeader)) return reject(400, 'bad_ttl', `TTL must be a non-negative integer of seconds, got ${JSON.stringify(ttlHeader.slice(0, 40))}`);
    const ttl = Number(ttlHeader);
    const urgency = ex.header('urgency');
    if (urgency !== undefined && !URGENCIES.has(urgency)) {
      return reject(400, 'bad_urgency', `Urgency must be very-low, low, normal or high (RFC 8030 section 5.3), got ${JSON.stringify(urgency.slice(0, 40))}`);
    }
    const topic = ex.header('topic');
    if (topic !== undefined && !TOPIC.test(topic)) {
      return reject(400, 'bad_topic', `Topic must be 1-32 characters of the base64url alphabet (RFC 8030 section 5.4), got ${JSON.stringify(topic.slice(0, 40))}`);
    }
    const encoding = ex.header('content-encoding');
    if (encoding === undefined || encoding.trim().toLowerCase() !== 'aes128gcm') {
      return reject(415, 'unsupported_content_encoding', `Content-Encoding must be aes128gcm (RFC 8291 section 4), got ${encoding === undefined ? 'none' : JSON.stringify(encoding.slice(0, 40))}`);
    }
    const declaredLength = ex.header('content-length');
    if (declaredLength !== undefined && Number(declaredLength) > this.maxBody) {
      return reject(413, 'payload_too_large', `Content-Length ${declaredLength} exceeds ${this.maxBody} octets`);
    }

    const body = await ex.readBody(this.maxBody);
    if (body.kind === 'aborted') {
      this.aborted++;
      if (attempt) attempt.status = 'aborted';
      return;
    }
    if (body.kind === 'too-large') return reject(413, 'payload_too_large', `body exceeds ${this.maxBody} octets`);
    const bytes = body.bytes;
    let header;
    try {
      header = parseAes128gcm(bytes);
      // RFC 8292 section 3.2: the ECDH key and the signing key must differ.
      if (base64url(header.senderPublicKey) === claims.publicKey) {
        throw new PushPeerError(400, 'same_key_for_ecdh_and_vapid', 'the aes128gcm keyid equals the VAPID key; RFC 8292 section 3.2 requires different keys');
      }
    } catch (err) {
      if (err instanceof PushPeerError) return reject(err.status, err.code, err.message);
      throw err;
    }

    // Faults apply to well-formed, authenticated requests, before decryption.
    const fault = this.takeRule(id);
    if (fault) {
      if (attempt) attempt.fault = fault;
      if (fault.delayMs !== undefined && fault.delayMs > 0) {
        await sleep(fault.delayMs, undefined, { signal: this.closing.signal });
        // A sender that went away while its push waited gave up on it: taken as never received,
        // since the sender cannot know of it (what happens after a 201 it never read is its own risk).
        if (ex.gone()) {
          this.aborted++;
          if (attempt) attempt.status = 'aborted';
          return;
        }
      }
      if (fault.resetStream) {
        this.resets++;
        if (attempt) attempt.status = 'reset';
        ex.reset();
        return;
      }
      if (fault.status !== undefined) {
        const headers: Record<string, string> = fault.retryAfter !== undefined ? { 'retry-after': String(fault.retryAfter) } : {};
        return reject(fault.status, 'fault', `fault injected by push-peer: ${JSON.stringify(fault)}`, headers);
      }
    }

    // A browser's channel is decrypted by the browser (its ack says whether that worked).
    let decrypted;
    if (verifyMode && sub) {
      try {
        decrypted = decryptPushMessage(bytes, sub.keys, header);
      } catch (err) {
        if (err instanceof PushPeerError) return reject(err.status, err.code, err.message);
        throw err;
      }
    }

    // Accepted.
    const messageId = `${this.messagePrefix}${(this.messageCounter++).toString(36)}`;
    const location = `${this.origin}/message/${messageId}`;
    this.accepted++;
    this.acceptedById.set(id, (this.acceptedById.get(id) ?? 0) + 1);
    increment(this.byStatus, '201');
    const effectiveTtl = Math.min(ttl, this.maxTtl);
    if (channel) {
      if (attempt) attempt.status = 201;
      this.browsers!.store(id, messageId, bytes, effectiveTtl, topic, at);
    }
    if (decrypted && attempt) {
      attempt.status = 201;
      const storedUntil = at + effectiveTtl * 1000;
      let replaces: string | undefined;
      if (topic !== undefined) {
        let byTopic = this.topics.get(id);
        if (!byTopic) this.topics.set(id, (byTopic = new Map()));
        const previous = byTopic.get(topic);
        // RFC 8030 section 5.4: replaces a message with the same Topic that is still stored.
        if (previous && previous.replacedBy === undefined && previous.storedUntil > at) {
          previous.replacedBy = messageId;
          replaces = previous.id;
          this.replaced++;
        }
      }
      const message: MutableMessage = {
        id: messageId,
        location,
        endpoint: attempt.endpoint,
        plaintext: Buffer.from(decrypted.plaintext),
        ttl,
        urgency: urgency as Urgency | undefined,
        topic,
        vapid: claims,
        at,
        httpVersion: ex.httpVersion,
        rs: decrypted.rs,
        paddingLength: decrypted.paddingLength,
        bodyLength: bytes.length,
        senderPublicKey: base64url(decrypted.senderPublicKey),
        replaces,
        replacedBy: undefined,
        subscriptionId: id,
        storedUntil,
      };
      if (topic !== undefined) this.topics.get(id)!.set(topic, message);
      this.messages.push(message);
      const list = this.messagesById.get(id);
      if (list) list.push(message);
      else this.messagesById.set(id, [message]);
    }
    ex.respond(201, { location, ttl: String(effectiveTtl) });
  }

  /** Verifies every token in verify mode; caches by Authorization value in count mode. */
  private authenticate(authorization: string | undefined): VapidClaims {
    const nowMs = Date.now();
    if (this.mode === 'count' && authorization !== undefined) {
      const cached = this.vapidCache.get(authorization);
      if (cached && cached.expMs > nowMs) return cached.claims;
    }
    const claims = verifyVapid(parseVapidAuthorization(authorization), this.origin, nowMs);
    if (this.mode === 'count' && authorization !== undefined) {
      if (this.vapidCache.size >= 10_000) this.vapidCache.clear();
      this.vapidCache.set(authorization, { claims, expMs: claims.exp * 1000 });
    }
    return claims;
  }

  // ---------------------------------------------------------------------------------------------
  // Control API (/__peer/...)

  private async control(ex: Exchange): Promise<void> {
    const url = new URL(ex.path, 'http://peer');
    const route = `${ex.method} ${url.pathname}`;
    const send = (status: number, value: unknown) => ex.respond(status, JSON_HEADERS, JSON.stringify(value));
    const readJson = async (): Promise<Record<string, unknown>> => {
      const body = await ex.readBody(1 << 20);
      if (body.kind !== 'complete') throw new TypeError('control request body missing or larger than 1 MiB');
      if (body.bytes.length === 0) return {};
      const value = JSON.parse(body.bytes.toString('utf8')) as unknown;
      if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TypeError('control request body must be a JSON object');
      return value as Record<string, unknown>;
    };
    const endpointParam = url.searchParams.get('endpoint') ?? undefined;
    try {
      switch (route) {
        case 'GET /__peer/health':
          return send(200, { ok: true, origin: this.origin, mode: this.mode });
        case 'GET /__peer/stats': {
          const stats = this.stats();
          return send(200, url.searchParams.get('perEndpoint') === '1' ? { ...stats, perEndpoint: this.acceptedPerEndpoint() } : stats);
        }
        case 'POST /__peer/reset':
          this.reset();
          return send(200, { ok: true });
        case 'GET /__peer/received':
          return send(200, {
            messages: this.received(endpointParam, { includeReplaced: url.searchParams.get('includeReplaced') === '1' }).map((m) => ({
              ...m,
              plaintext: m.plaintext.toString('base64url'),
              text: m.plaintext.toString('utf8'),
            })),
          });
        case 'GET /__peer/attempts':
          return send(200, { attempts: this.attempts(endpointParam), count: endpointParam === undefined ? this.requests : this.attemptCount(endpointParam) });
        case 'GET /__peer/key-pool':
          return send(200, { keys: this.poolPublicKeys(), poolEndpoints: this.options.poolEndpoints === Infinity ? 'unbounded' : (this.options.poolEndpoints ?? 0) });
        case 'POST /__peer/subscriptions': {
          const body = await readJson();
          const count = body['count'] ?? 1;
          const applicationServerKey = body['applicationServerKey'];
          if (typeof count !== 'number' || !Number.isInteger(count) || count < 0 || count > 100_000) throw new TypeError('count must be an integer 0-100000');
          if (applicationServerKey !== undefined && typeof applicationServerKey !== 'string') throw new TypeError('applicationServerKey must be a base64url string');
          return send(200, { subscriptions: this.createSubscriptions(count, applicationServerKey !== undefined ? { applicationServerKey } : {}) });
        }
        case 'POST /__peer/respond-with': {
          const body = await readJson();
          const endpoint = body['endpoint'];
          const rule = (body['rule'] ?? null) as FaultRule | FaultRule[] | null;
          if (typeof endpoint === 'string') this.respondWith(endpoint, rule);
          else if (endpoint === undefined || endpoint === null) this.respondWith(rule);
          else throw new TypeError('endpoint must be a string or absent');
          return send(200, { ok: true });
        }
        case 'POST /__peer/expire': {
          const body = await readJson();
          const endpoint = body['endpoint'];
          const status = body['status'] ?? 410;
          if (typeof endpoint !== 'string') throw new TypeError('endpoint must be a string');
          if (status !== 404 && status !== 410) throw new TypeError('status must be 404 or 410');
          this.expireSubscription(endpoint, status);
          return send(200, { ok: true });
        }
        default:
          return send(404, { error: 'not_found', message: `no control route ${route}` });
      }
    } catch (err) {
      if (err instanceof TypeError || err instanceof RangeError || err instanceof SyntaxError) return send(400, { error: 'bad_control_request', message: err.message });
      throw err;
    }
  }
}

function publicMessage(m: MutableMessage): ReceivedMessage {
  return {
    id: m.id,
    location: m.location,
    endpoint: m.endpoint,
    plaintext: m.plaintext,
    ttl: m.ttl,
    urgency: m.urgency,
    topic: m.topic,
    vapid: m.vapid,
    at: m.at,
    httpVersion: m.httpVersion,
    rs: m.rs,
    paddingLength: m.paddingLength,
    bodyLength: m.bodyLength,
    senderPublicKey: m.senderPublicKey,
    replaces: m.replaces,
    replacedBy: m.replacedBy,
  };
}
