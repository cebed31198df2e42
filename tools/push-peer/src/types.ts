// The push peer's public shapes: its options, what it records, its fault rules and its interface.
import type { VapidClaims } from './crypto.js';
import type { HttpVersion } from './exchange.js';
import type { KeyPoolEntry, PushSubscriptionJSON } from './keypool.js';
import type { BrowserChannel, BrowserMessage } from './websocket.js';

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
  /**
   * Accept the push (recorded and counted like any other), then wait this long before answering
   * 201: a sender that dies meanwhile pushed it without learning so (what a push service's 201
   * lost with its sender looks like). Not with `status` or `resetStream`.
   */
  readonly delayResponseMs?: number;
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
