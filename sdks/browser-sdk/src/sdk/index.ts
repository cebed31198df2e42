import {
  deleteValue,
  enqueue,
  exclusively,
  isRetryableStatus,
  PENDING_NAVIGATION,
  PENDING_NAVIGATION_MS,
  readValue,
  replayQueue,
  sendCall,
  SUBSCRIPTION_ENDPOINT,
  writeValue,
  type PendingNavigation,
  type QueuedCall,
  type ReplayResult,
} from '../shared/store.js';

export type { ReplayResult } from '../shared/store.js';

/**
 * Herald's browser client SDK: subscribes the page's visitor to the site's web push through the
 * site's service worker (herald-sw.js), keeps the subscriber's external id and tags, queues the
 * calls that fail and hands notification clicks to the page. See docs/browser-sdk.md.
 */

/** What onSubscribe gets: the browser's subscription and the subscriber Herald stored it as. */
export interface HeraldSubscription {
  /** Null while the subscribe call waits in the retry queue (the server was unreachable). */
  subscriberId: string | null;
  endpoint: string;
  pushSubscription: PushSubscription;
}

/** What onNotificationClick gets as `data`. */
export interface NotificationClickData {
  notificationId: string;
  /** The action button clicked, or '' for the notification itself. */
  action: string;
  title: string;
  body: string;
  /** True when the click opened this page (pending navigation): the navigation already happened. */
  opened: boolean;
}

export interface HeraldConfig {
  /** The site's public key, pk_<id> (GET /api/v1/server/site shows it). */
  siteKey: string;
  /** Herald's origin, e.g. https://herald.example.com. Default: the page's origin. */
  apiUrl?: string;
  /** Ask for permission by itself, promptDelay ms after the SDK starts, when not asked yet. Default false. */
  autoPrompt?: boolean;
  /** Milliseconds before the automatic prompt. Default 0. */
  promptDelay?: number;
  /** Logs what the SDK does to the console. */
  debug?: boolean;
  /** Where the site serves herald-sw.js (same origin as the page). Default '/herald-sw.js'. */
  serviceWorkerUrl?: string;
  /** The service worker's scope. Default: the browser's (the script's folder). */
  serviceWorkerScope?: string;
  onSubscribe?: (subscription: HeraldSubscription) => void;
  onPermissionDenied?: () => void;
  onNotSupported?: () => void;
  /** Return false to keep the page where it is instead of navigating to `url`. */
  onNotificationClick?: (url: string, data: NotificationClickData) => boolean | void;
}

export interface Herald {
  /** Asks for notification permission and subscribes when it is granted. Null when not subscribed. */
  promptForPermission(): Promise<HeraldSubscription | null>;
  /** Subscribes; the permission must already be granted. */
  subscribe(): Promise<HeraldSubscription>;
  /** Ends the browser's push subscription and tells Herald. False when there was none. */
  unsubscribe(): Promise<boolean>;
  /**
   * Attaches the site's own user id to this subscriber (now, or when it subscribes). With `proof`
   * (HMAC-SHA256 of the id under the identity-verification secret, computed by the site's
   * backend) the id is verified: this browser becomes the user's approver device and receives
   * their questions. Without it the id is stored unverified (campaigns still reach it).
   */
  setExternalId(externalId: string, options?: { proof?: string }): Promise<void>;
  /** Adds tags, each key/value pair as the tag "key:value" (see the docs). */
  setTags(tags: Record<string, string>): Promise<void>;
  /** Replays the calls that failed, once, in order. */
  processRetryQueue(): Promise<ReplayResult>;
  isSupported(): boolean;
}

/**
 * An answer from Herald that is not retried: a 4xx other than 429, in Herald's error shape. A
 * plain Error with two fields (not a class: Firefox 44, a minimum browser, has no class syntax).
 */
export interface HeraldApiError extends Error {
  name: 'HeraldApiError';
  status: number;
  code: string;
}

export function isHeraldApiError(err: unknown): err is HeraldApiError {
  return err instanceof Error && err.name === 'HeraldApiError';
}

// Herald's limits (packages/domain SUBSCRIBER_LIMITS), checked here so a bad value fails at once
// instead of waiting in the retry queue.
const MAX_EXTERNAL_ID = 256;
const MAX_TAG = 64;
const MAX_TAGS = 50;
const EXTERNAL_ID = 'externalId';
const PROOF = 'externalIdProof';
const TAGS = 'tags';

/** Push, service workers, notifications and IndexedDB, in a secure context: all the SDK needs. */
export function isSupported(): boolean {
  return (
    typeof window !== 'undefined' &&
    window.isSecureContext !== false &&
    'serviceWorker' in navigator &&
    'PushManager' in window &&
    'Notification' in window &&
    'indexedDB' in window &&
    typeof Promise !== 'undefined'
  );
}

function base64UrlToBytes(value: string): Uint8Array<ArrayBuffer> {
  const base64 = value.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (value.length % 4)) % 4);
  const binary = atob(base64);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** The browser and OS families, as the subscriber list shows them; nothing more precise. */
function deviceFields(): { browser: string; os: string; language: string; timezone: string } {
  const agent = navigator.userAgent;
  const browser = /Edg\//.test(agent)
    ? 'Edge'
    : /OPR\//.test(agent)
      ? 'Opera'
      : /Firefox\//.test(agent)
        ? 'Firefox'
        : /Chrom(e|ium)\//.test(agent)
          ? 'Chrome'
          : /Safari\//.test(agent)
            ? 'Safari'
            : '';
  const os = /Android/.test(agent)
    ? 'Android'
    : /iPhone|iPad|iPod/.test(agent)
      ? 'iOS'
      : /Windows/.test(agent)
        ? 'Windows'
        : /Mac OS X/.test(agent)
          ? 'macOS'
          : /Linux|X11/.test(agent)
            ? 'Linux'
            : '';
  let timezone = '';
  try {
    timezone = Intl.DateTimeFormat().resolvedOptions().timeZone ?? '';
  } catch {
    // Older browsers without time zone support send none.
  }
  return { browser, os, language: (navigator.language ?? '').slice(0, 100), timezone: timezone.slice(0, 100) };
}

function tagsOf(map: Record<string, string>): string[] {
  return Object.keys(map).map((key) => `${key}:${map[key]}`);
}

function checkTags(map: Record<string, string>): void {
  for (const key of Object.keys(map)) {
    const value = map[key];
    if (key === '' || typeof value !== 'string') throw new TypeError('setTags takes a map of non-empty string keys to string values.');
    const tag = `${key}:${value}`;
    if (tag.includes(',')) throw new TypeError(`The tag "${tag}" contains a comma; tags cannot.`);
    if (tag.length > MAX_TAG) throw new TypeError(`The tag "${tag}" is longer than ${MAX_TAG} characters.`);
  }
}

export function createHerald(config: HeraldConfig): Herald {
  if (!config || typeof config.siteKey !== 'string' || !/^pk_[A-Za-z0-9_-]+$/.test(config.siteKey)) {
    throw new TypeError('createHerald needs the site key: createHerald({ siteKey: "pk_..." }).');
  }
  const apiUrl = (config.apiUrl ?? (typeof location === 'undefined' ? '' : location.origin)).replace(/\/+$/, '');
  const siteKey = config.siteKey;
  const log = (...args: unknown[]) => {
    if (config.debug) console.debug('[herald]', ...args);
  };
  const supported = isSupported();

  let vapidKey: Promise<string> | undefined;
  const applicationServerKey = () => {
    vapidKey ??= fetch(`${apiUrl}/api/v1/sdk-config`, { headers: { authorization: `Bearer ${siteKey}` }, credentials: 'omit' })
      .then(async (response) => {
        if (!response.ok) throw await apiError(response);
        return ((await response.json()) as { vapidPublicKey: string }).vapidPublicKey;
      })
      .catch((err: unknown) => {
        vapidKey = undefined;
        throw err;
      });
    return vapidKey;
  };

  /**
   * One call to Herald: sent now; on a network failure, 429 or 5xx kept in the retry queue
   * (undefined returned); any other refusal thrown as HeraldApiError.
   */
  async function call<T>(path: string, body: unknown, key: string): Promise<T | undefined> {
    const queued: QueuedCall = { key, url: `${apiUrl}/api/v1${path}`, method: 'POST', siteKey, body: JSON.stringify(body) };
    let response: Response;
    try {
      // Waiting calls go first, so this one cannot overtake an older call about the same subscriber.
      const replay = await processRetryQueue();
      if (replay.remaining > 0) throw new Error('the retry queue still waits');
      response = await sendCall(queued);
    } catch (err) {
      log('queued', path, err);
      await enqueue(queued);
      return undefined;
    }
    if (isRetryableStatus(response.status)) {
      log('queued', path, response.status);
      await enqueue(queued);
      return undefined;
    }
    if (!response.ok) throw await apiError(response);
    return (await response.json()) as T;
  }

  async function registration(): Promise<ServiceWorkerRegistration> {
    // The worker learns Herald's origin and the site key from its URL.
    const url = new URL(config.serviceWorkerUrl ?? '/herald-sw.js', location.href);
    url.searchParams.set('api', apiUrl);
    url.searchParams.set('siteKey', siteKey);
    const registered = await navigator.serviceWorker.register(url.href, config.serviceWorkerScope ? { scope: config.serviceWorkerScope } : undefined);
    await activated(registered);
    return registered;
  }

  type Fields = { externalId?: string; externalIdProof?: string; tags?: string[] };

  async function subscriberFields(): Promise<Fields> {
    const externalId = await readValue<string>(EXTERNAL_ID);
    const externalIdProof = await readValue<string>(PROOF);
    const tags = await readValue<Record<string, string>>(TAGS);
    return { ...(externalId ? { externalId } : {}), ...(externalId && externalIdProof ? { externalIdProof } : {}), ...(tags ? { tags: tagsOf(tags) } : {}) };
  }

  /** Tells Herald about the subscription (again), with what the page set about its subscriber. */
  async function store(subscription: PushSubscription, fields: Fields, key: string): Promise<string | null> {
    const body = { ...subscription.toJSON(), ...fields, ...deviceFields() };
    const stored = await call<{ subscriberId: string }>('/subscribe', body, key);
    return stored?.subscriberId ?? null;
  }

  async function subscribe(): Promise<HeraldSubscription> {
    if (!supported) throw new Error('This browser does not support web push.');
    if (Notification.permission !== 'granted') throw new Error(`Notification permission is ${Notification.permission}; call promptForPermission() first.`);
    const registered = await registration();
    const pushSubscription =
      (await registered.pushManager.getSubscription()) ??
      (await registered.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: base64UrlToBytes(await applicationServerKey()) }));
    const endpoint = pushSubscription.endpoint;
    await writeValue(SUBSCRIPTION_ENDPOINT, endpoint);
    const subscriberId = await store(pushSubscription, await subscriberFields(), `subscribe:${endpoint}`);
    log('subscribed', endpoint, subscriberId);
    const subscribed = { subscriberId, endpoint, pushSubscription };
    config.onSubscribe?.(subscribed);
    return subscribed;
  }

  async function currentSubscription(): Promise<PushSubscription | null> {
    if (!supported || Notification.permission !== 'granted') return null;
    const registered = await navigator.serviceWorker.getRegistration(config.serviceWorkerScope ?? config.serviceWorkerUrl ?? '/herald-sw.js');
    return (await registered?.pushManager.getSubscription()) ?? null;
  }

  async function promptForPermission(): Promise<HeraldSubscription | null> {
    if (!supported) {
      config.onNotSupported?.();
      return null;
    }
    const permission = await requestPermission();
    log('permission', permission);
    if (permission === 'granted') return subscribe();
    if (permission === 'denied') config.onPermissionDenied?.();
    return null;
  }

  async function unsubscribe(): Promise<boolean> {
    const subscription = await currentSubscription();
    if (!subscription) return false;
    const endpoint = subscription.endpoint;
    await subscription.unsubscribe();
    await call('/unsubscribe', { endpoint }, `unsubscribe:${endpoint}`);
    return true;
  }

  /** Kept for the next subscribe; sent at once (as a repeated subscribe) when already subscribed. */
  async function update(fields: Fields, key: string): Promise<void> {
    const subscription = await currentSubscription();
    if (subscription) await store(subscription, fields, `${key}:${subscription.endpoint}`);
  }

  async function setExternalId(externalId: string, options: { proof?: string } = {}): Promise<void> {
    if (typeof externalId !== 'string' || externalId === '' || externalId.length > MAX_EXTERNAL_ID) {
      throw new TypeError(`The external id must be a string of 1 to ${MAX_EXTERNAL_ID} characters.`);
    }
    const proof = options.proof;
    if (proof !== undefined && !/^[0-9a-f]{64}$/i.test(proof)) throw new TypeError('The proof must be 64 hex characters (HMAC-SHA256 of the external id).');
    if (!supported) return;
    await writeValue(EXTERNAL_ID, externalId);
    // Kept with the id, so a later subscribe proves it again; a new id without a proof drops it.
    await writeValue(PROOF, proof ?? '');
    await update({ externalId, ...(proof ? { externalIdProof: proof } : {}) }, `externalId:${externalId}`);
  }

  async function setTags(tags: Record<string, string>): Promise<void> {
    checkTags(tags);
    if (!supported) return;
    const merged = { ...((await readValue<Record<string, string>>(TAGS)) ?? {}), ...tags };
    if (Object.keys(merged).length > MAX_TAGS) throw new TypeError(`A subscriber has at most ${MAX_TAGS} tags.`);
    await writeValue(TAGS, merged);
    await update({ tags: tagsOf(tags) }, `tags:${tagsOf(tags).join(',')}`);
  }

  let replaying: Promise<ReplayResult> | undefined;
  function processRetryQueue(): Promise<ReplayResult> {
    if (!supported) return Promise.resolve({ sent: 0, dropped: 0, remaining: 0 });
    // One replay at a time in this page; the lock keeps other tabs and the worker out.
    replaying ??= exclusively(() => replayQueue(sendCall)).finally(() => {
      replaying = undefined;
    });
    return replaying;
  }

  /** A click the service worker hands over: the callback decides whether the page navigates. */
  function notificationClicked(url: string, data: NotificationClickData): boolean {
    let navigate = true;
    try {
      navigate = config.onNotificationClick?.(url, data) !== false;
    } catch (err) {
      log('onNotificationClick threw', err);
    }
    return navigate;
  }

  async function takePendingNavigation(): Promise<void> {
    const pending = await readValue<PendingNavigation>(PENDING_NAVIGATION);
    if (!pending) return;
    await deleteValue(PENDING_NAVIGATION);
    if (Date.now() - pending.at > PENDING_NAVIGATION_MS) return;
    notificationClicked(pending.url, { ...(pending.data as NotificationClickData), opened: true });
  }

  if (!supported) {
    // After the caller's own code has run, so it can rely on the instance it got back.
    setTimeout(() => config.onNotSupported?.(), 0);
  } else {
    navigator.serviceWorker.addEventListener('message', (event: MessageEvent) => {
      const message = event.data as { herald?: string; url?: string; data?: NotificationClickData } | null;
      if (message?.herald !== 'notificationclick' || typeof message.url !== 'string') return;
      const navigate = notificationClicked(message.url, { ...(message.data as NotificationClickData), opened: false });
      event.ports[0]?.postMessage({ handled: true });
      if (navigate && location.href !== message.url) location.assign(message.url);
    });
    // Messages wait until started; older browsers (no startMessages) deliver them at once.
    if ('startMessages' in navigator.serviceWorker) navigator.serviceWorker.startMessages();
    void processRetryQueue().then((result) => log('retry queue', result), (err: unknown) => log('retry queue failed', err));
    void takePendingNavigation().catch((err: unknown) => log('pending navigation', err));
    if (config.autoPrompt && Notification.permission === 'default') {
      setTimeout(() => void promptForPermission().catch((err: unknown) => log('prompt failed', err)), config.promptDelay ?? 0);
    }
  }

  return { promptForPermission, subscribe, unsubscribe, setExternalId, setTags, processRetryQueue, isSupported };
}

/** Notification.requestPermission, in its promise form or (older browsers) its callback form. */
function requestPermission(): Promise<NotificationPermission> {
  return new Promise((resolve, reject) => {
    const answer = Notification.requestPermission(resolve);
    if (answer) answer.then(resolve, reject);
  });
}

/** Resolves once the registration has an active worker (pushManager.subscribe needs one). */
function activated(registration: ServiceWorkerRegistration): Promise<void> {
  if (registration.active) return Promise.resolve();
  const worker = registration.installing ?? registration.waiting;
  return new Promise((resolve, reject) => {
    if (!worker) return reject(new Error('The service worker did not install.'));
    worker.addEventListener('statechange', () => {
      if (worker.state === 'activated') resolve();
      if (worker.state === 'redundant') reject(new Error('The service worker failed to install.'));
    });
  });
}

async function apiError(response: Response): Promise<HeraldApiError> {
  let body: { error?: string; code?: string } = {};
  try {
    body = (await response.json()) as typeof body;
  } catch {
    // Not Herald's error shape: the status says enough.
  }
  const error = new Error(body.error ?? `Herald answered ${response.status}.`);
  return Object.assign(error, { name: 'HeraldApiError' as const, status: response.status, code: body.code ?? 'unknown' });
}
