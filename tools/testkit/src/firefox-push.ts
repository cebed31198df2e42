import assert from 'node:assert/strict';

import { eventually } from './sending.js';

/**
 * Web push in Debian's Firefox ESR driven through WebDriver BiDi (puppeteer-core): the profile's
 * preferences that make the strict push peer's WebSocket face Firefox's push service, and
 * Firefox's own notification windows (chrome://global/content/alerts/alert.xhtml), reached as
 * browsing contexts of chrome scope when Firefox is started with --remote-allow-system-access.
 * BiDi can neither screenshot nor send input to chrome contexts; it can run script in them.
 */

/** The profile's preferences: `webSocketUrl` is the peer's (dom.push.serverURL); `debug` logs Firefox's push service. */
export function firefoxPushPreferences(webSocketUrl: string, debug = false): Record<string, unknown> {
  return {
    // Notifications granted by the profile.
    'permissions.default.desktop-notification': 1,
    'dom.push.enabled': true,
    // The remote agent's recommended preferences turn it off unless the profile sets it (subscribe
    // then fails: "Push service disabled").
    'dom.push.connection.enabled': true,
    'dom.push.serverURL': webSocketUrl,
    // The peer's WebSocket face is plain ws:// on loopback.
    'dom.push.testing.allowInsecureServerURL': true,
    // Reconnect a second after the peer drops the connection (default 5 s).
    'dom.push.retryBaseInterval': 1000,
    // No desktop notification daemon here: Firefox's own alert windows show the notifications
    // (with the system backend, showNotification fails with NS_ERROR_FAILURE).
    'alerts.useSystemBackend': false,
    ...(debug ? { 'dom.push.loglevel': 'debug', 'devtools.console.stdout.chrome': true } : {}),
  };
}

type BidiResult = { result: { type: string; result?: { value?: unknown }; exceptionDetails?: { text: string }; contexts?: Array<{ context: string; url: string }> } };

/** Firefox's own windows, through the BiDi connection of puppeteer-core's `browser`. */
export function firefoxChrome(browser: unknown) {
  const bidi = (method: string, params: object) => (browser as { connection: { send(method: string, params: object): Promise<BidiResult> } }).connection.send(method, params);

  async function inChrome(context: string, expression: string): Promise<unknown> {
    const { result } = await bidi('script.evaluate', { expression, target: { context }, awaitPromise: false });
    if (result.type !== 'success') throw new Error(`in Firefox's notification window: ${result.exceptionDetails?.text ?? result.type}`);
    return result.result?.value;
  }

  /** The notification window showing `title`. */
  async function notificationWindow(title: string): Promise<string> {
    const find = async () => {
      const { result } = await bidi('browsingContext.getTree', { 'moz:scope': 'chrome' });
      for (const { context, url } of result.contexts ?? []) {
        if (url === 'chrome://global/content/alerts/alert.xhtml' && (await inChrome(context, "document.getElementById('alertTitleLabel').value")) === title) return context;
      }
      return '';
    };
    return eventually(`Firefox's notification window for "${title}"`, find, (context) => context !== '');
  }

  return {
    inChrome,
    notificationWindow,

    /** Sets one of Firefox's preferences from its main window (what about:config does). */
    async setPreference(name: string, value: boolean): Promise<void> {
      const { result } = await bidi('browsingContext.getTree', { 'moz:scope': 'chrome' });
      const main = result.contexts?.find((entry) => entry.url === 'chrome://browser/content/browser.xhtml');
      assert.ok(main, 'Firefox’s main window');
      await inChrome(main.context, `Services.prefs.setBoolPref(${JSON.stringify(name)}, ${String(value)})`);
    },

    /**
     * Clicks the notification's text: the window's own click handler (alert.js) tells Firefox, which
     * dispatches notificationclick to the worker, allowed to open a window. A DOM click, since BiDi
     * sends no input to chrome windows.
     */
    async clickNotification(title: string): Promise<void> {
      const context = await notificationWindow(title);
      await inChrome(context, "document.getElementById('alertTextLabel').dispatchEvent(new MouseEvent('click', { bubbles: true, button: 0, view: window }))");
    },
  };
}
