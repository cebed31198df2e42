import { randomBytes } from 'node:crypto';

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { HeraldError, invalidFields } from '@herald/errors';
import type { PublicSite } from '@herald/proto/herald/account/v1/account';
import { Type } from '@sinclair/typebox';

import { endUserOf, principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import type { GatewayConfig } from '../config.js';
import { accentColor, escapeHtml, PAGE_HEAD, sendTokenPage } from '../html.js';
import { perClientLimit, tokenId, type RateLimiter } from '../rate-limit.js';
import { ErrorResponse, withErrors } from '../schemas/common.js';
import { DeviceFields, ExternalId, PushSubscription } from '../schemas/subscribers.js';
import { checkPushSubscription, storeSubscription } from '../subscriptions.js';
import { PUBLIC_PREFIX } from '../prefixes.js';

/**
 * Single-use links that make the browser opening them a verified device of one externalId (an
 * approver device: counted for reachability, sent questions). Two ways to get one, one mechanism:
 * POST /pair (every plan; the key owner's device, or an end-user's the key may address) and
 * POST /enroll (Partner plan; one of the partner's end-users). Each makes a link
 * {origin}/enroll/<token>; the page behind it subscribes the browser to push by posting the
 * subscription to POST /api/v1/enroll/<token>, which uses the link up.
 */

const LinkResponse = (description: string) =>
  Type.Object({
    enrollmentUrl: Type.String({ description }),
    expiresAt: Type.String(),
    externalId: Type.String({ description: 'Whose verified device the browser becomes' }),
  });

export const enrollRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.post(
      '/pair',
      {
        // Every key that may open decisions may pair the device that answers them.
        config: { access: { scope: 'decisions' } },
        schema: {
          tags: ['Enrollment'],
          operationId: 'createPairing',
          summary: "Make a single-use, short-lived link that pairs a browser as the key owner's (or an end-user's) approver device",
          description:
            'Every plan. The browser that opens the link and allows notifications becomes a verified device of externalId (default: the key owner): it counts for reachability and receives questions. Scope decisions (dashboard, runtime and bound keys; a bound key pairs its own end-user only).',
          body: Type.Object({ externalId: Type.Optional(ExternalId) }, { additionalProperties: false }),
          response: withErrors({ 200: LinkResponse('Single-use link to open in the browser (or scan as a QR code)') }),
        },
      },
      async (request) => {
        const principal = principalOf(request);
        const externalId = endUserOf(principal, request.body.externalId, 'pair devices') ?? principal.ownerExternalId;
        const link = await clients.account.createEnrollment({ workspaceId: principal.workspaceId, externalId, keyId: principal.keyId, pairing: true });
        return { enrollmentUrl: link.enrollmentUrl, expiresAt: link.expiresAt, externalId };
      },
    );

    app.post(
      '/enroll',
      {
        config: { access: { scope: 'enroll', plan: 'partner' } },
        schema: {
          tags: ['Enrollment'],
          operationId: 'createEnrollment',
          summary: "Make a single-use link that connects an end-user's browser (Partner)",
          body: Type.Object({ externalId: Type.Optional(ExternalId) }, { additionalProperties: false }),
          response: withErrors({ 200: LinkResponse('Single-use link the end-user opens in their browser') }),
        },
      },
      async (request) => {
        const principal = principalOf(request);
        const externalId = endUserOf(principal, request.body.externalId, 'create enrollment links');
        if (externalId === undefined) throw invalidFields('body', [{ field: 'externalId', in: 'body', problem: 'is required' }]);
        const link = await clients.account.createEnrollment({ workspaceId: principal.workspaceId, externalId, keyId: principal.keyId, pairing: false });
        return { enrollmentUrl: link.enrollmentUrl, expiresAt: link.expiresAt, externalId };
      },
    );
  };

const accentOf = (site: PublicSite | undefined): string => accentColor(site?.primaryColor);

interface Page {
  status: number;
  heading: string;
  text: string;
  site?: PublicSite;
  /** Present while the link can be used: the button and its script. */
  token?: string;
}

const pageScript = `(() => {
  const main = document.querySelector('main');
  const button = document.getElementById('enable');
  const status = document.getElementById('status');
  const say = (text) => { status.textContent = text; };
  if (!('serviceWorker' in navigator) || !('PushManager' in window) || !('Notification' in window)) {
    button.disabled = true;
    say('This browser cannot receive push notifications here. On iPhone or iPad, add this page to the Home Screen and open it from there.');
    return;
  }
  const serverKey = (value) => Uint8Array.from(atob(value.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0));
  const activated = (registration) => new Promise((resolve) => {
    const worker = registration.installing || registration.waiting || registration.active;
    if (!worker || worker.state === 'activated') return resolve();
    worker.addEventListener('statechange', () => { if (worker.state === 'activated') resolve(); });
  });
  button.addEventListener('click', async () => {
    button.disabled = true;
    say('Asking for permission…');
    try {
      if ((await Notification.requestPermission()) !== 'granted') {
        say('Notifications are blocked for this page. Allow them in the browser settings, then try again.');
        button.disabled = false;
        return;
      }
      // One worker scope per site, so enrolling with another site keeps this site's subscription.
      const registration = await navigator.serviceWorker.register('/enroll/sw.js', { scope: '/enroll/s/' + main.dataset.site + '/' });
      await activated(registration);
      const subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: serverKey(main.dataset.key) });
      const body = Object.assign(subscription.toJSON(), { language: navigator.language, timezone: Intl.DateTimeFormat().resolvedOptions().timeZone });
      const response = await fetch(main.dataset.submit, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const answer = await response.json().catch(() => ({}));
      if (response.ok) {
        button.hidden = true;
        say('Done: this browser will now get notifications. You can close this page.');
      } else {
        say(answer.message || 'Something went wrong. Please try again.');
        button.disabled = response.status < 500 && response.status !== 429;
      }
    } catch (err) {
      say('Notifications could not be turned on: ' + (err && err.message ? err.message : String(err)));
      button.disabled = false;
    }
  });
})();`;

/** What the service worker does with a push: show it, and open its url when tapped. */
const serviceWorker = `self.addEventListener('push', (event) => {
  let data = {};
  try { data = event.data ? event.data.json() : {}; } catch { data = { body: event.data ? event.data.text() : '' }; }
  event.waitUntil(self.registration.showNotification(data.title || 'Notification', {
    body: data.body || '', icon: data.icon, image: data.image, tag: data.notificationId, actions: data.actions || [],
    data: { url: data.url, answerUrl: data.answerUrl },
  }));
});
self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const data = event.notification.data || {};
  // A question's action button (Yes, No) answers it without opening a page.
  if (event.action && data.answerUrl) {
    event.waitUntil(fetch(data.answerUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ answer: event.action }) }));
    return;
  }
  if (data.url) event.waitUntil(self.clients.openWindow(data.url));
});
`;

function renderPage(page: Page, nonce: string): string {
  const { site, token } = page;
  const siteName = site ? escapeHtml(site.name) : 'Herald';
  const usable = site && token ? { site, token } : undefined;
  const data = usable
    ? ` data-submit="${PUBLIC_PREFIX}/enroll/${usable.token}" data-key="${escapeHtml(usable.site.vapidPublicKey)}" data-site="${escapeHtml(usable.site.slug)}"`
    : '';
  const action = usable
    ? `<button id="enable" type="button">${escapeHtml(usable.site.buttonText || 'Allow notifications')}</button>
  <p id="status" role="status" aria-live="polite"></p>
  <script nonce="${nonce}">${pageScript}</script>`
    : '';
  return `${PAGE_HEAD}<title>${escapeHtml(page.heading)} · ${siteName}</title>
<style nonce="${nonce}">
  :root { color-scheme: light dark; --accent: ${accentOf(page.site)}; }
  body { margin: 0; min-height: 100vh; display: grid; place-items: center; padding: 1.25rem; box-sizing: border-box;
         font: 1.0625rem/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
  main { width: 100%; max-width: 28rem; }
  h1 { font-size: 1.5rem; line-height: 1.25; margin: 0 0 .75rem; }
  button { font: inherit; font-weight: 600; width: 100%; min-height: 3rem; padding: .75rem 1rem; border: 0;
           border-radius: .5rem; background: var(--accent); color: #fff; cursor: pointer; }
  button:focus-visible { outline: 3px solid CanvasText; outline-offset: 3px; }
  button:disabled { opacity: .6; cursor: default; }
  #status { min-height: 1.5em; }
</style>
</head>
<body>
<main${data}>
  <h1>${escapeHtml(page.heading)}</h1>
  <p>${escapeHtml(page.text)}</p>
  ${action}
</main>
</body>
</html>
`;
}

async function enrollmentPage(clients: ServiceClients, token: string): Promise<Page> {
  let enrollment;
  try {
    enrollment = await clients.account.getEnrollment({ token });
  } catch (err) {
    if (err instanceof HeraldError && err.code === 'not_found') {
      return { status: 404, heading: 'Link not found', text: 'This enrollment link does not exist. Check that it was copied whole, or ask for a new one.' };
    }
    throw err;
  }
  const site = enrollment.site;
  if (!site) throw new Error('account service returned no site');
  switch (enrollment.state) {
    case 'active':
      return {
        status: 200,
        heading: enrollment.pairing ? `Receive questions from ${site.name} on this device` : `Get notifications from ${site.name}`,
        text: enrollment.pairing
          ? 'Tap the button below and allow notifications: questions that need your answer will reach this browser. This link works once and expires soon.'
          : 'Tap the button below and allow notifications. This link works once and expires soon.',
        site,
        token,
      };
    case 'unavailable':
      return { status: 403, heading: 'Enrollment is not available', text: `${site.name} cannot enroll browsers at the moment. Please try again later.`, site };
    case 'used':
      return { status: 409, heading: 'This link has already been used', text: `Each enrollment link works once. To enroll again, ask ${site.name} for a new link.`, site };
    default:
      return { status: 410, heading: 'This link has expired', text: `Enrollment links work for a short time only. Ask ${site.name} for a new link.`, site };
  }
}

export interface EnrollmentPageOptions {
  clients: ServiceClients;
  config: Pick<GatewayConfig, 'allowAnyPushService' | 'pushServiceHosts' | 'ipRateLimitPerMinute'>;
  limiter: RateLimiter;
}

/** The link's page, its service worker and where the page posts: public, limited per client IP. */
export const enrollmentPageRoutes =
  ({ clients, config, limiter }: EnrollmentPageOptions): FastifyPluginAsyncTypebox =>
  async (app) => {
    const limitPerIp = perClientLimit(limiter, config.ipRateLimitPerMinute, (params) => `enroll:${tokenId(params.token)}`);
    const publicAccess = { access: { public: true } } as const;
    const TokenParams = Type.Object({ token: Type.String({ maxLength: 200 }) });

    app.get('/enroll/sw.js', { config: publicAccess }, async (_request, reply) =>
      reply.type('text/javascript; charset=utf-8').header('cache-control', 'max-age=3600').send(serviceWorker),
    );

    app.get('/enroll/:token', { config: publicAccess, onRequest: limitPerIp, schema: { params: TokenParams } }, async (request, reply) => {
      const page = await enrollmentPage(clients, request.params.token);
      // Only the page's own script and style run.
      const nonce = randomBytes(16).toString('base64');
      const policy = `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
      return sendTokenPage(reply, page.status, renderPage(page, nonce), policy);
    });

    app.post(
      `${PUBLIC_PREFIX}/enroll/:token`,
      {
        config: publicAccess,
        onRequest: limitPerIp,
        schema: {
          tags: ['Enrollment'],
          operationId: 'enrollBrowser',
          summary: "Store the enrolling browser's push subscription (the enrollment page posts here)",
          params: TokenParams,
          body: Type.Object({ ...PushSubscription, ...DeviceFields }, { additionalProperties: false }),
          response: withErrors({
            200: Type.Object({ success: Type.Literal(true), subscriberId: Type.String(), created: Type.Literal(false), externalId: Type.String() }),
            201: Type.Object({ success: Type.Literal(true), subscriberId: Type.String(), created: Type.Literal(true), externalId: Type.String() }),
            409: ErrorResponse,
            410: ErrorResponse,
          }),
        },
      },
      async (request, reply) => {
        // Validated before the link is used up, so a bad subscription does not cost the link.
        const subscription = checkPushSubscription(request.body, '', config);
        const enrollment = await clients.account.consumeEnrollment({ token: request.params.token });
        const { externalId } = enrollment;
        // The link proves the external id: whoever asked for it could address that person.
        const { subscriberId, created } = await storeSubscription(clients, enrollment, subscription, { ...request.body, externalId }, true);
        return reply.code(created ? 201 : 200).send({ success: true, subscriberId, created, externalId });
      },
    );
  };
