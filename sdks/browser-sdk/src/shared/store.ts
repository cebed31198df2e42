/**
 * The small IndexedDB database the page's SDK and the service worker share (same origin): the
 * retry queue of calls that failed, and a few values (the subscriber's external id and tags,
 * the pending navigation). Written against the IndexedDB API that both window and worker
 * scopes have, so one copy serves both bundles.
 */

const DB_NAME = 'herald';
const DB_VERSION = 1;
const QUEUE = 'queue';
const VALUES = 'values';

/** A call to replay: everything fetch needs, and the key that makes a second copy a duplicate. */
export interface QueuedCall {
  /** Same key, same call: enqueueing it again while one waits adds nothing. */
  key: string;
  url: string;
  method: 'GET' | 'POST';
  /** Sent as `Authorization: Bearer <siteKey>` when present. */
  siteKey?: string;
  body?: string;
}

interface StoredCall extends QueuedCall {
  seq?: number;
}

function request<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

let opened: Promise<IDBDatabase> | undefined;

function database(): Promise<IDBDatabase> {
  opened ??= new Promise<IDBDatabase>((resolve, reject) => {
    const open = indexedDB.open(DB_NAME, DB_VERSION);
    open.onupgradeneeded = () => {
      const db = open.result;
      // seq orders replays; the unique key index refuses a second copy of a waiting call.
      db.createObjectStore(QUEUE, { keyPath: 'seq', autoIncrement: true }).createIndex('key', 'key', { unique: true });
      db.createObjectStore(VALUES);
    };
    open.onsuccess = () => resolve(open.result);
    open.onerror = () => reject(open.error);
  }).catch((err: unknown) => {
    opened = undefined;
    throw err;
  });
  return opened;
}

async function transaction<T>(stores: string, mode: IDBTransactionMode, work: (tx: IDBTransaction) => Promise<T>): Promise<T> {
  const tx = (await database()).transaction(stores, mode);
  const done = new Promise<void>((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error);
  });
  const result = await work(tx);
  await done;
  return result;
}

/** Adds a call at the end of the queue unless the same call (same key) already waits there. */
export function enqueue(call: QueuedCall): Promise<void> {
  return transaction(QUEUE, 'readwrite', async (tx) => {
    const store = tx.objectStore(QUEUE);
    const waiting = await request(store.index('key').count(call.key));
    if (waiting === 0) await request(store.add({ ...call }));
  });
}

/** The waiting calls, oldest first. */
export function queuedCalls(): Promise<Array<QueuedCall & { seq: number }>> {
  return transaction(QUEUE, 'readonly', (tx) => request(tx.objectStore(QUEUE).getAll() as IDBRequest<Array<StoredCall & { seq: number }>>));
}

export function dequeue(seq: number): Promise<void> {
  return transaction(QUEUE, 'readwrite', async (tx) => {
    await request(tx.objectStore(QUEUE).delete(seq));
  });
}

export function readValue<T>(name: string): Promise<T | undefined> {
  return transaction(VALUES, 'readonly', (tx) => request(tx.objectStore(VALUES).get(name) as IDBRequest<T | undefined>));
}

export function writeValue(name: string, value: unknown): Promise<void> {
  return transaction(VALUES, 'readwrite', async (tx) => {
    await request(tx.objectStore(VALUES).put(value, name));
  });
}

export function deleteValue(name: string): Promise<void> {
  return transaction(VALUES, 'readwrite', async (tx) => {
    await request(tx.objectStore(VALUES).delete(name));
  });
}

/** Why a call's answer keeps it in the queue: the network, the server's overload, its outage. */
export const isRetryableStatus = (status: number): boolean => status === 429 || status >= 500;

/** What a replay did: sent and accepted, dropped (refused for good), still waiting. */
export interface ReplayResult {
  sent: number;
  dropped: number;
  remaining: number;
}

/**
 * Replays the waiting calls once, in order, stopping at the first that fails again for a reason
 * worth retrying (so later calls never overtake it). A call the server refuses for good (4xx
 * other than 429) is dropped. Never loops: what still fails waits for the next replay.
 */
export async function replayQueue(send: (call: QueuedCall) => Promise<Response>): Promise<ReplayResult> {
  const calls = await queuedCalls();
  let sent = 0;
  let dropped = 0;
  for (const call of calls) {
    let response: Response;
    try {
      response = await send(call);
    } catch {
      break;
    }
    if (isRetryableStatus(response.status)) break;
    await dequeue(call.seq);
    if (response.ok) sent += 1;
    else dropped += 1;
  }
  return { sent, dropped, remaining: calls.length - sent - dropped };
}

/**
 * Runs a replay holding a lock every tab and the service worker share (Web Locks, where the
 * browser has them), so two replays never send the same waiting call twice.
 */
export function exclusively<T>(work: () => Promise<T>): Promise<T> {
  const locks = (navigator as { locks?: LockManager }).locks;
  if (!locks) return work();
  // The lock is held until the callback's promise settles.
  return new Promise<T>((resolve, reject) => {
    locks.request('herald-retry-queue', () => work().then(resolve, reject)).catch(reject);
  });
}

/** fetch for a queued call: JSON body, the site key as a Bearer token, no cookies. */
export function sendCall(call: QueuedCall): Promise<Response> {
  const headers: Record<string, string> = {};
  if (call.body !== undefined) headers['content-type'] = 'application/json';
  if (call.siteKey) headers.authorization = `Bearer ${call.siteKey}`;
  return fetch(call.url, { method: call.method, headers, body: call.body, credentials: 'omit', keepalive: true });
}

/** The pending navigation a notification click leaves for the page, valid 30 seconds. */
export interface PendingNavigation {
  url: string;
  data: unknown;
  at: number;
}
export const PENDING_NAVIGATION = 'pendingNavigation';
export const PENDING_NAVIGATION_MS = 30_000;

/** The endpoint the page subscribed, for a pushsubscriptionchange that does not name the old one. */
export const SUBSCRIPTION_ENDPOINT = 'subscriptionEndpoint';
