// The subscriptions a peer holds the keys of: individual ones (a key pair each) and pool-derived
// ones (`/push/<index>`, keys cycling through a shared pool, so a million endpoints cost a pool's
// worth of memory), and the ones expired to answer 404 or 410.
import { createECDH, randomBytes } from 'node:crypto';

import { base64url, bytesOf, privateScalar, receiverKeys, type ReceiverKeys } from './crypto.js';
import { generateKeyPool, subscriptionFromPool, validateKeyPool, type KeyPoolEntry, type PushSubscriptionJSON } from './keypool.js';
import type { CreateSubscriptionOptions, CreateSubscriptionsOptions, PeerSubscription, PushPeerOptions } from './types.js';

export interface Subscription {
  readonly id: string;
  readonly keys: ReceiverKeys;
  readonly entry: KeyPoolEntry;
  readonly applicationServerKey: string | undefined;
  readonly poolIndex: number | undefined;
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

const POOL_ID = /^(?:0|[1-9][0-9]{0,14})$/;
export const SUBSCRIPTION_ID = /^[A-Za-z0-9_-]{1,128}$/;

export class SubscriptionStore {
  private readonly individual = new Map<string, Subscription>();
  private pool: PoolKeys[] | undefined;
  private readonly poolRanges: PoolRange[] = [];
  private poolNext = 0;
  private readonly expired = new Map<string, 404 | 410>();

  /** `origin`: the peer's, known once it listens. */
  constructor(
    private readonly options: Pick<PushPeerOptions, 'keyPool' | 'poolEndpoints' | 'poolApplicationServerKey'>,
    private readonly origin: () => string,
  ) {
    if (options.keyPool !== undefined) this.setPool(typeof options.keyPool === 'number' ? generateKeyPool(options.keyPool) : validateKeyPool(options.keyPool));
    if (options.poolEndpoints !== undefined) {
      if (!this.pool) throw new TypeError('poolEndpoints needs keyPool');
      if (!(options.poolEndpoints >= 0)) throw new TypeError('poolEndpoints must be >= 0');
    }
    if (options.poolApplicationServerKey !== undefined) bytesOf(options.poolApplicationServerKey, 'poolApplicationServerKey', 65);
  }

  private setPool(entries: readonly KeyPoolEntry[]): void {
    this.pool = entries.map((entry) => ({ entry, keys: receiverKeys(bytesOf(entry.privateKey, 'privateKey', 32), bytesOf(entry.auth, 'auth', 16)) }));
  }

  create(options: CreateSubscriptionOptions = {}): PushSubscriptionJSON {
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
    return { endpoint: `${this.origin()}/push/${id}`, expirationTime: null, keys: { p256dh: entry.p256dh, auth: entry.auth } };
  }

  createMany(count: number, options: CreateSubscriptionsOptions = {}): PushSubscriptionJSON[] {
    if (!Number.isInteger(count) || count < 0) throw new RangeError(`count must be a non-negative integer, got ${count}`);
    if (options.keyPool !== undefined) {
      if (!this.pool) this.setPool(generateKeyPool(options.keyPool));
      else if (this.pool.length !== options.keyPool) throw new RangeError(`this peer already has a key pool of ${this.pool.length} (asked for ${options.keyPool})`);
    }
    if (!this.pool) return Array.from({ length: count }, () => this.create(options.applicationServerKey !== undefined ? { applicationServerKey: options.applicationServerKey } : {}));
    const applicationServerKey = options.applicationServerKey !== undefined ? base64url(bytesOf(options.applicationServerKey, 'applicationServerKey', 65)) : undefined;
    const start = this.poolNext;
    this.poolNext += count;
    if (count > 0) this.poolRanges.push({ start, end: start + count, applicationServerKey });
    const pool = this.pool.map((p) => p.entry);
    const out = new Array<PushSubscriptionJSON>(count);
    for (let i = 0; i < count; i++) out[i] = subscriptionFromPool(this.origin(), pool, start + i);
    return out;
  }

  /** The public half of the key pool (what `/__peer/key-pool` serves). */
  poolPublicKeys(): { p256dh: string; auth: string }[] {
    return (this.pool ?? []).map(({ entry }) => ({ p256dh: entry.p256dh, auth: entry.auth }));
  }

  /** The subscription id an endpoint (absolute, or a `/push/<id>` path) names; undefined if not this peer's. */
  idOf(endpoint: string): string | undefined {
    let path = endpoint;
    if (!endpoint.startsWith('/')) {
      const origin = this.origin();
      if (!endpoint.startsWith(`${origin}/`)) return undefined;
      path = endpoint.slice(origin.length);
    }
    if (!path.startsWith('/push/')) return undefined;
    const id = path.slice('/push/'.length);
    return SUBSCRIPTION_ID.test(id) ? id : undefined;
  }

  requireId(endpoint: string): string {
    const id = this.idOf(endpoint);
    if (id === undefined) throw new TypeError(`${endpoint} is not an endpoint of this peer (${this.origin()}/push/<id>)`);
    return id;
  }

  lookup(id: string): Subscription | undefined {
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

  describe(endpoint: string): PeerSubscription | undefined {
    const id = this.idOf(endpoint);
    const sub = id === undefined ? undefined : this.lookup(id);
    if (!sub || id === undefined) return undefined;
    return {
      endpoint: `${this.origin()}/push/${id}`,
      expirationTime: null,
      keys: { p256dh: sub.entry.p256dh, auth: sub.entry.auth },
      privateKey: sub.entry.privateKey,
      applicationServerKey: sub.applicationServerKey,
      state: this.expired.get(id) ?? 'active',
      poolIndex: sub.poolIndex,
    };
  }

  expire(endpoint: string, status: 404 | 410): void {
    const id = this.requireId(endpoint);
    if (!this.lookup(id)) throw new TypeError(`${endpoint} is not a subscription of this peer`);
    if (status !== 404 && status !== 410) throw new TypeError('an expired subscription answers 404 or 410');
    this.expired.set(id, status);
  }

  /** What an expired subscription answers; undefined while it is active. */
  expiredStatus(id: string): 404 | 410 | undefined {
    return this.expired.get(id);
  }

  clearExpiries(): void {
    this.expired.clear();
  }
}
