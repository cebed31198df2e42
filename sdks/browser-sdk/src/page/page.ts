import { createHerald, isSupported } from '../sdk/index.js';

/**
 * The hosted subscribe page's script ({origin}/s/<slug>): one button, and the page's state in
 * words. The page carries its settings as data attributes on <main>; the SDK does the rest.
 */

type State = 'ready' | 'working' | 'subscribed' | 'blocked' | 'unsupported' | 'failed';

const main = document.querySelector('main');
const button = document.getElementById('subscribe') as HTMLButtonElement | null;
const status = document.getElementById('status');

function show(state: State, text: string): void {
  if (!main || !button || !status) return;
  main.dataset.state = state;
  status.textContent = text;
  button.hidden = state === 'subscribed' || state === 'unsupported' || state === 'blocked';
  button.disabled = state === 'working';
}

const blockedText = 'Notifications are blocked for this page. Allow them in the browser’s site settings, then reload.';
const subscribedText = 'You are subscribed. You can close this page.';

async function start(): Promise<void> {
  if (!main || !button) return;
  const { siteKey = '', serviceWorker = '', scope = '' } = main.dataset;
  if (!isSupported()) {
    show('unsupported', 'This browser cannot receive push notifications. On iPhone or iPad, add this page to the Home Screen and open it from there.');
    return;
  }
  const herald = createHerald({
    siteKey,
    serviceWorkerUrl: serviceWorker,
    serviceWorkerScope: scope,
    onPermissionDenied: () => show('blocked', blockedText),
    onSubscribe: () => show('subscribed', subscribedText),
  });
  if (Notification.permission === 'denied') return show('blocked', blockedText);
  const registration = await navigator.serviceWorker.getRegistration(scope);
  if (Notification.permission === 'granted' && (await registration?.pushManager.getSubscription())) return show('subscribed', subscribedText);
  show('ready', '');
  button.addEventListener('click', () => {
    show('working', 'Asking for permission…');
    herald.promptForPermission().then(
      (subscribed) => {
        if (!subscribed && Notification.permission === 'default') show('ready', 'Permission was not given. Press the button to try again.');
      },
      (err: unknown) => show('failed', `Notifications could not be turned on: ${err instanceof Error ? err.message : String(err)}`),
    );
  });
}

start().catch((err: unknown) => show('failed', `The page could not start: ${err instanceof Error ? err.message : String(err)}`));
