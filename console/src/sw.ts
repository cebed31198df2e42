/**
 * The console's service worker (/console/sw.js, scope /console/): what makes it an installable app
 * that opens without the network. It keeps the app shell (the page, its hashed script and style
 * sheet, the icons) in a cache named after the build; a page load goes to the network first and
 * falls back to the cached page offline (which then says it cannot reach Herald); the hashed assets
 * come from the cache. The API is never cached: every call goes to the server.
 *
 * It also shows the web pushes of questions addressed to the member (their devices, turned on in
 * the inbox): a push is a notification whose click opens the question in the console's inbox
 * (focusing an open console window, else opening one), with its impression and click reported to
 * the engagement endpoint like any notification's.
 */

/** Set by the build (console/build/bundle.ts): the shell's paths, and the build's id. */
declare const SHELL: string[];
declare const BUILD: string;

// The DOM library has no service worker types (its WebWorker library conflicts with DOM): the few used here.
interface ExtendableEvent extends Event {
  waitUntil(promise: Promise<unknown>): void;
}
interface FetchEvent extends ExtendableEvent {
  readonly request: Request;
  respondWith(response: Promise<Response>): void;
}
interface PushEvent extends ExtendableEvent {
  readonly data: { json(): unknown } | null;
}
interface NotificationEvent extends ExtendableEvent {
  readonly notification: Notification;
}
interface WindowClient {
  readonly url: string;
  focus(): Promise<WindowClient>;
  navigate(url: string): Promise<WindowClient | null>;
}
interface WorkerScope {
  addEventListener(type: 'install' | 'activate', listener: (event: ExtendableEvent) => void): void;
  addEventListener(type: 'fetch', listener: (event: FetchEvent) => void): void;
  addEventListener(type: 'push', listener: (event: PushEvent) => void): void;
  addEventListener(type: 'notificationclick', listener: (event: NotificationEvent) => void): void;
  skipWaiting(): Promise<void>;
  readonly clients: {
    claim(): Promise<void>;
    matchAll(options: { type: 'window'; includeUncontrolled: boolean }): Promise<WindowClient[]>;
    openWindow(url: string): Promise<WindowClient | null>;
  };
  readonly registration: { showNotification(title: string, options: NotificationOptions): Promise<void> };
  readonly location: Location;
}

const worker = self as unknown as WorkerScope;
const CACHE = `herald-console-${BUILD}`;
const PAGE = '/console/';

worker.addEventListener('install', (event) => {
  event.waitUntil(
    caches
      .open(CACHE)
      .then((cache) => cache.addAll(SHELL))
      .then(() => worker.skipWaiting()),
  );
});

worker.addEventListener('activate', (event) => {
  // An older build's cache goes once this one runs.
  event.waitUntil(
    caches
      .keys()
      .then((names) => Promise.all(names.filter((name) => name.startsWith('herald-console-') && name !== CACHE).map((name) => caches.delete(name))))
      .then(() => worker.clients.claim()),
  );
});

async function fromCache(request: Request | string): Promise<Response | undefined> {
  return (await caches.open(CACHE)).match(request);
}

worker.addEventListener('fetch', (event) => {
  const { request } = event;
  const url = new URL(request.url);
  if (request.method !== 'GET' || url.origin !== worker.location.origin || !url.pathname.startsWith(PAGE)) return;
  if (request.mode === 'navigate') {
    // Every console path is the same page: the network's, or offline the cached one.
    event.respondWith(fetch(request).catch(async () => (await fromCache(PAGE)) ?? Response.error()));
    return;
  }
  if (SHELL.includes(url.pathname)) event.respondWith(fromCache(request).then((cached) => cached ?? fetch(request)));
});

/** The push payload (services/campaign/src/payload.ts): what the console shows and opens. */
interface Payload {
  notificationId: string;
  title: string;
  body: string;
  url?: string;
  token?: string;
}

/** What a shown notification keeps for its click: the console page it opens and its engagement token. */
interface ShownData {
  console: 1;
  url: string;
  token: string;
}

/** Reports an impression or a click (POST /api/v1/events); a failure loses only a counter. */
function report(type: 'impression' | 'click', token: string): Promise<unknown> {
  if (!token) return Promise.resolve();
  return fetch('/api/v1/events', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type, token }), credentials: 'omit' }).catch(() => undefined);
}

function payloadOf(event: PushEvent): Payload | undefined {
  try {
    const payload = event.data?.json() as Payload | undefined;
    return typeof payload?.title === 'string' ? payload : undefined;
  } catch {
    return undefined;
  }
}

worker.addEventListener('push', (event) => {
  const payload = payloadOf(event);
  if (!payload) return;
  // Only a console page is opened from here: anything else opens the inbox.
  const target = new URL(payload.url ?? PAGE, worker.location.origin);
  const url = target.origin === worker.location.origin && target.pathname.startsWith(PAGE) ? target.href : `${PAGE}inbox`;
  const data: ShownData = { console: 1, url, token: payload.token ?? '' };
  event.waitUntil(worker.registration.showNotification(payload.title, { body: payload.body, tag: payload.notificationId, data }).then(() => report('impression', data.token)));
});

/** Shows `url` in an open console window (focused), else in a new one. */
async function openInConsole(url: string): Promise<void> {
  const windows = await worker.clients.matchAll({ type: 'window', includeUncontrolled: true });
  const open = windows.find((client) => new URL(client.url).pathname.startsWith(PAGE));
  if (open) {
    // A browser may refuse the focus; the page still moves to the question.
    const focused = await open.focus().catch(() => open);
    if (await focused.navigate(url).catch(() => null)) return;
  }
  await worker.clients.openWindow(url);
}

worker.addEventListener('notificationclick', (event) => {
  const data = event.notification.data as ShownData | null;
  if (data?.console !== 1) return;
  event.notification.close();
  event.waitUntil(Promise.all([report('click', data.token), openInConsole(data.url)]));
});
