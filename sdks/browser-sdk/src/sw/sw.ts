/// <reference lib="webworker" />
import {
  enqueue,
  exclusively,
  isRetryableStatus,
  PENDING_NAVIGATION,
  readValue,
  replayQueue,
  sendCall,
  SUBSCRIPTION_ENDPOINT,
  writeValue,
  type PendingNavigation,
  type QueuedCall,
} from '../shared/store.js';

/**
 * Herald's service worker (herald-sw.js): shows each push as a notification, reports its
 * impression, click and dismissal to Herald's engagement endpoint with the payload's token
 * (queued when that fails), answers question buttons, opens or focuses the target page, and moves
 * the subscriber to the browser's new subscription on pushsubscriptionchange.
 *
 * Herald's origin is where this file was loaded from (`?api=<origin>` overrides it); the site key
 * comes as `?siteKey=pk_...` (needed for pushsubscriptionchange only).
 */

declare const self: ServiceWorkerGlobalScope;

/** The decrypted push payload (services/campaign/src/payload.ts, plus the engagement token). */
interface Payload {
  notificationId: string;
  title: string;
  body: string;
  url?: string;
  icon?: string;
  image?: string;
  actions?: Array<{ action: string; title: string }>;
  answerUrl?: string;
  token?: string;
}

/** What each notification carries, for its click and close. */
interface NotificationData {
  herald: 1;
  notificationId: string;
  url: string;
  token: string;
  answerUrl: string;
}

type EventKind = 'impression' | 'click' | 'dismiss';

const params = new URL(self.location.href).searchParams;
const apiUrl = (params.get('api') ?? self.location.origin).replace(/\/+$/, '');
const siteKey = params.get('siteKey') ?? '';

self.addEventListener('install', () => {
  void self.skipWaiting();
});
self.addEventListener('activate', (event) => {
  event.waitUntil(self.clients.claim());
});

/** Sends now; on a network failure, 429 or 5xx keeps the call for a later replay. */
async function sendOrQueue(call: QueuedCall): Promise<Response | undefined> {
  try {
    // Older events first, so a later replay keeps their order.
    const replay = await exclusively(() => replayQueue(sendCall));
    if (replay.remaining === 0) {
      const response = await sendCall(call);
      if (!isRetryableStatus(response.status)) return response;
    }
  } catch {
    // Offline: queued below.
  }
  await enqueue(call);
  return undefined;
}

function report(kind: EventKind, token: string, action?: string): Promise<unknown> {
  if (!token) return Promise.resolve();
  const body = JSON.stringify({ type: kind, token, ...(action ? { action } : {}) });
  // The same event for the same notification is one event: the key keeps one copy queued.
  return sendOrQueue({ key: `event:${kind}:${token}`, url: `${apiUrl}/api/v1/events`, method: 'POST', body });
}

function parsePayload(event: PushEvent): Payload | undefined {
  try {
    const payload = event.data?.json() as Payload | undefined;
    return payload && typeof payload.title === 'string' ? payload : undefined;
  } catch {
    return undefined;
  }
}

self.addEventListener('push', (event) => {
  const payload = parsePayload(event);
  if (!payload) return;
  const data: NotificationData = {
    herald: 1,
    notificationId: payload.notificationId,
    url: payload.url ?? '',
    token: payload.token ?? '',
    answerUrl: payload.answerUrl ?? '',
  };
  const options: NotificationOptions & { image?: string; actions?: Array<{ action: string; title: string }> } = {
    body: payload.body,
    data,
    tag: payload.notificationId,
    ...(payload.icon ? { icon: payload.icon } : {}),
    ...(payload.image ? { image: payload.image } : {}),
    ...(payload.actions ? { actions: payload.actions } : {}),
  };
  event.waitUntil(self.registration.showNotification(payload.title, options).then(() => report('impression', data.token)));
});

function dataOf(notification: Notification): NotificationData | undefined {
  const data = notification.data as NotificationData | null;
  return data?.herald === 1 ? data : undefined;
}

/** Asks an open page of the site to handle the click (its onNotificationClick); false when none answers. */
function handOver(client: WindowClient, url: string, data: object): Promise<boolean> {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    const timer = setTimeout(() => resolve(false), 1000);
    channel.port1.onmessage = () => {
      clearTimeout(timer);
      resolve(true);
    };
    client.postMessage({ herald: 'notificationclick', url, data }, [channel.port2]);
  });
}

async function openOrFocus(url: string, clickData: object): Promise<void> {
  const target = new URL(url, self.location.origin);
  const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  const page = windows.find((client) => client.url === target.href) ?? windows.find((client) => new URL(client.url).origin === self.location.origin);
  if (page) {
    // A browser may refuse the focus (it needs the click's user activation); the page can still take the click.
    const focused = await page.focus().catch(() => page);
    if ((await handOver(focused, target.href, clickData)) || focused.url === target.href) return;
  }
  // No page took it: the click opens the URL, and the page it opens finds the click there.
  const pending: PendingNavigation = { url: target.href, data: clickData, at: Date.now() };
  await writeValue(PENDING_NAVIGATION, pending);
  await self.clients.openWindow(target.href);
}

self.addEventListener('notificationclick', (event) => {
  const notification = event.notification;
  const data = dataOf(notification);
  if (!data) return;
  notification.close();
  const action = event.action;
  const work: Array<Promise<unknown>> = [report('click', data.token, action)];
  if (action && data.answerUrl) {
    // A question's button is its answer: recorded without opening anything.
    const answer = JSON.stringify({ answer: action });
    work.push(sendOrQueue({ key: `answer:${data.answerUrl}`, url: data.answerUrl, method: 'POST', body: answer }));
  } else if (data.url) {
    work.push(openOrFocus(data.url, { notificationId: data.notificationId, action, title: notification.title, body: notification.body }));
  }
  event.waitUntil(Promise.all(work));
});

self.addEventListener('notificationclose', (event) => {
  const data = dataOf(event.notification);
  if (data) event.waitUntil(report('dismiss', data.token));
});

self.addEventListener('pushsubscriptionchange', (event) => {
  const change = event as PushSubscriptionChangeEvent;
  event.waitUntil(
    (async () => {
      const oldEndpoint = change.oldSubscription?.endpoint ?? (await readValue<string>(SUBSCRIPTION_ENDPOINT));
      const renewed =
        change.newSubscription ??
        (await self.registration.pushManager.subscribe(
          change.oldSubscription?.options ?? { userVisibleOnly: true },
        ));
      if (!oldEndpoint || !siteKey) return;
      const { endpoint, keys } = renewed.toJSON();
      await writeValue(SUBSCRIPTION_ENDPOINT, endpoint);
      await sendOrQueue({
        key: `change:${oldEndpoint}:${endpoint ?? ''}`,
        url: `${apiUrl}/api/v1/subscription-change`,
        method: 'POST',
        siteKey,
        body: JSON.stringify({ oldEndpoint, newSubscription: { endpoint, keys } }),
      });
    })(),
  );
});

/** PushSubscriptionChangeEvent is not in TypeScript's webworker library. */
interface PushSubscriptionChangeEvent extends ExtendableEvent {
  readonly oldSubscription: PushSubscription | null;
  readonly newSubscription: PushSubscription | null;
}
