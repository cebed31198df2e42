/**
 * The console's service worker (/console/sw.js, scope /console/): what makes it an installable app
 * that opens without the network. It keeps the app shell (the page, its hashed script and style
 * sheet, the icons) in a cache named after the build; a page load goes to the network first and
 * falls back to the cached page offline (which then says it cannot reach Herald); the hashed assets
 * come from the cache. The API is never cached: every call goes to the server.
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
interface WorkerScope {
  addEventListener(type: 'install' | 'activate', listener: (event: ExtendableEvent) => void): void;
  addEventListener(type: 'fetch', listener: (event: FetchEvent) => void): void;
  skipWaiting(): Promise<void>;
  readonly clients: { claim(): Promise<void> };
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
