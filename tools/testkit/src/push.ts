import { createECDH, randomBytes, randomUUID } from 'node:crypto';

/** What a browser's PushSubscription.toJSON() gives: an endpoint and RFC 8291 keys (base64url). */
export interface TestPushSubscription {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

/**
 * A push subscription with real keys: p256dh a fresh P-256 point, auth 16 random bytes. The
 * endpoint is unique under `base` (an https URL of a push service; gateways accept any host
 * when ALLOW_ANY_PUSH_SERVICE=true).
 */
export function pushSubscription(base = 'https://127.0.0.1:9/push'): TestPushSubscription {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return {
    endpoint: `${base}/${randomUUID()}`,
    keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: randomBytes(16).toString('base64url') },
  };
}
