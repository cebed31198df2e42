import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import type { AddedDevice, AddMyDeviceRequest, MyDevice, Site } from '@herald/sdk';
import { useState } from 'react';

import { api, ApiError } from '../api.js';
import { BASE } from '../router.js';
import { ErrorNote, Table, When } from '../ui.js';

/**
 * The signed-in member's devices: "Turn on notifications" subscribes this browser to web push with
 * the site's VAPID key (GET /site) through the console's service worker and makes it one of the
 * member's devices (POST /me/devices); each question addressed to the member ({kind: member}) is
 * then pushed to it, and tapping the notification opens the question in the inbox. Turning them
 * off unsubscribes the browser and removes the device (DELETE /me/devices/{id}); any of the
 * member's devices can be removed from the list (GET /me/devices).
 */

const DEVICES = ['me', 'devices'] as const;
/** Which of the member's devices this browser is (the id POST /me/devices answered). */
const THIS_DEVICE = 'herald-console-device';

const pushSupported = (): boolean => 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;

/** The VAPID public key (base64url) as the applicationServerKey bytes. */
const keyBytes = (base64url: string): Uint8Array<ArrayBuffer> =>
  Uint8Array.from(atob(base64url.replace(/-/g, '+').replace(/_/g, '/')), (char) => char.charCodeAt(0));

/** The first family whose pattern the user agent matches: how the list names a device. */
const family = (pairs: Array<[RegExp, string]>): string => pairs.find(([pattern]) => pattern.test(navigator.userAgent))?.[1] ?? '';

async function pushSubscription(): Promise<PushSubscription | null> {
  const registration = await navigator.serviceWorker.getRegistration(`${BASE}/`);
  return registration ? registration.pushManager.getSubscription() : null;
}

/** Removes a device; one already gone (removed from another device) is no error. */
async function removeDevice(id: string): Promise<void> {
  try {
    await api('DELETE', `/me/devices/${encodeURIComponent(id)}`);
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 404)) throw err;
  }
}

export function MyDevices() {
  const queryClient = useQueryClient();
  const devices = useQuery({ queryKey: DEVICES, queryFn: () => api<{ devices: MyDevice[] }>('GET', '/me/devices') });
  const [thisDevice, setThisDevice] = useState(() => window.localStorage.getItem(THIS_DEVICE));
  const remember = (id: string | null) => {
    if (id === null) window.localStorage.removeItem(THIS_DEVICE);
    else window.localStorage.setItem(THIS_DEVICE, id);
    setThisDevice(id);
    void queryClient.invalidateQueries({ queryKey: DEVICES });
  };

  const turnOn = useMutation({
    mutationFn: async () => {
      // Asked from this click: Safari (and the iOS home-screen app) prompts only from a user gesture.
      if ((await Notification.requestPermission()) !== 'granted') {
        throw new Error("Notifications are blocked for the console: allow them in the browser's site settings, then try again.");
      }
      const site = await queryClient.fetchQuery({ queryKey: ['site'], queryFn: () => api<Site>('GET', '/site') });
      const registration = await navigator.serviceWorker.ready;
      const subscription =
        (await registration.pushManager.getSubscription()) ??
        (await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(site.vapidPublicKey) }));
      const { endpoint = '', keys } = subscription.toJSON();
      const body: AddMyDeviceRequest = {
        endpoint,
        keys: { p256dh: keys?.p256dh ?? '', auth: keys?.auth ?? '' },
        browser: family([[/Edg\//, 'Edge'], [/Firefox\//, 'Firefox'], [/Chrom(e|ium)\//, 'Chrome'], [/Safari\//, 'Safari']]),
        os: family([[/Android/, 'Android'], [/iPhone|iPad|iPod/, 'iOS'], [/Windows/, 'Windows'], [/Mac OS X/, 'macOS'], [/Linux|X11/, 'Linux']]),
      };
      return (await api<AddedDevice>('POST', '/me/devices', body)).deviceId;
    },
    onSuccess: remember,
  });

  const turnOff = useMutation({
    mutationFn: async () => {
      await (await pushSubscription())?.unsubscribe();
      if (thisDevice) await removeDevice(thisDevice);
    },
    onSuccess: () => remember(null),
  });

  const remove = useMutation({
    mutationFn: async (id: string) => {
      if (id === thisDevice) await (await pushSubscription())?.unsubscribe();
      await removeDevice(id);
      return id;
    },
    onSuccess: (id) => (id === thisDevice ? remember(null) : void queryClient.invalidateQueries({ queryKey: DEVICES })),
  });

  const on = thisDevice !== null && (devices.data?.devices ?? []).some((device) => device.id === thisDevice && device.status === 'active');
  const busy = turnOn.isPending || turnOff.isPending || remove.isPending;

  return (
    <section aria-labelledby="devices-heading">
      <h2 id="devices-heading">Notifications</h2>
      <p className="help">Questions addressed to you are pushed to the devices you turn notifications on in; tapping one opens it here.</p>
      {!pushSupported() ? (
        <p className="help">This browser cannot receive web push here. On an iPhone or iPad, add the console to the Home Screen (Share, then Add to Home Screen) and turn notifications on in that app.</p>
      ) : on ? (
        <button type="button" className="secondary" disabled={busy} onClick={() => turnOff.mutate()}>
          Turn off notifications on this device
        </button>
      ) : (
        <button type="button" disabled={busy || !devices.data} onClick={() => turnOn.mutate()}>
          Turn on notifications on this device
        </button>
      )}
      <ErrorNote error={turnOn.error ?? turnOff.error ?? remove.error ?? devices.error} />
      {devices.data && devices.data.devices.length > 0 ? (
        <Table caption="Your devices" columns={['Device', 'Status', 'Added', 'Remove']}>
          {devices.data.devices.map((device) => {
            const name = `${[device.browser, device.os].filter(Boolean).join(' on ') || 'A browser'}${device.id === thisDevice ? ' (this device)' : ''}`;
            return (
            <tr key={device.id}>
              <th scope="row">{name}</th>
              <td>{device.status}</td>
              <td>
                <When at={device.createdAt} />
              </td>
              <td>
                <button type="button" className="danger" disabled={busy} aria-label={`Remove ${name}`} onClick={() => remove.mutate(device.id)}>
                  Remove
                </button>
              </td>
            </tr>
            );
          })}
        </Table>
      ) : null}
    </section>
  );
}
