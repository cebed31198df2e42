import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { EngagementTokens, type EngagementSubject } from '@herald/domain';
import { startPushPeer, type PushPeer, type ReceivedMessage } from '@herald/push-peer';
import { createWorkspace, type TestWorkspace } from './admin.js';
import { call, SERVER_API } from './http.js';
import { startStack, type Stack, type StackOptions } from './processes.js';

/**
 * A sending stack (gateway, account, audience, campaign, delivery) wired to a strict local push
 * service that trusts nothing it does not verify: VAPID on every request, decryption with each
 * subscriber's private key.
 */
export interface SendingHarness {
  stack: Stack;
  peer: PushPeer;
  /**
   * A push as its service worker reads it: the payload without its engagement token, and what the
   * token names. Throws when the token is missing or was not signed with the stack's secret.
   */
  openPush(message: ReceivedMessage): OpenedPush;
  stop(): Promise<void>;
}

export interface OpenedPush {
  payload: Record<string, unknown> & { notificationId: string };
  token: string;
  engagement: EngagementSubject;
}

export async function startSendingHarness(options: StackOptions = {}): Promise<SendingHarness> {
  const peer = await startPushPeer({ tls: true });
  const caFile = join(await mkdtemp(join(tmpdir(), 'herald-peer-')), 'ca.pem');
  await writeFile(caFile, peer.ca ?? '');
  const stack = await startStack({
    ...options,
    sending: true,
    gatewayEnv: { ALLOW_ANY_PUSH_SERVICE: 'true', ...options.gatewayEnv },
    deliveryEnv: { PUSH_CA_FILE: caFile, RETRY_POLL_MS: '50', PUSH_RETRY_BASE_MS: '100', ...options.deliveryEnv },
  });
  const tokens = new EngagementTokens(stack.engagementTokenSecret);
  return {
    stack,
    peer,
    openPush(message) {
      const { token, ...payload } = JSON.parse(message.plaintext.toString()) as OpenedPush['payload'] & { token?: string };
      const engagement = token === undefined ? undefined : tokens.verify(token);
      if (!token || !engagement) throw new Error(`the push to ${message.endpoint} carries no valid engagement token: ${message.plaintext.toString()}`);
      return { payload, token, engagement };
    },
    async stop() {
      await stack.stop();
      await peer.close();
    },
  };
}

export interface Audience {
  workspace: TestWorkspace;
  vapidPublicKey: string;
  subscribers: Array<{ id: string; endpoint: string; keys: { p256dh: string; auth: string }; externalId: string; tags: string[] }>;
}

/** A workspace with `count` browser subscribers registered through the public SDK endpoint. */
export async function seedAudience(
  harness: SendingHarness,
  count: number,
  plan = 'growth',
  describe: (index: number) => { externalId: string; tags: string[] } = (index) => ({ externalId: `user-${index}`, tags: [] }),
): Promise<Audience> {
  const workspace = await createWorkspace(plan, 'shop.example.test');
  const site = await call<{ vapidPublicKey: string }>(harness.stack.gatewayUrl, `${SERVER_API}/site`, { key: workspace.apiKey });
  const vapidPublicKey = site.body.vapidPublicKey;
  const subscribers: Audience['subscribers'] = [];
  for (let index = 0; index < count; index += 1) {
    const subscription = harness.peer.createSubscription({ applicationServerKey: vapidPublicKey });
    const { externalId, tags } = describe(index);
    const response = await call<{ subscriberId: string }>(harness.stack.gatewayUrl, '/api/v1/subscribe', {
      method: 'POST',
      key: workspace.siteKey,
      headers: { origin: 'https://shop.example.test' },
      body: { endpoint: subscription.endpoint, keys: subscription.keys, externalId, tags },
    });
    if (response.status !== 201) throw new Error(`subscribe answered ${response.status}: ${JSON.stringify(response.body)}`);
    subscribers.push({ id: response.body.subscriberId, endpoint: subscription.endpoint, keys: subscription.keys, externalId, tags });
  }
  return { workspace, vapidPublicKey, subscribers };
}

/** Pushes of one notification (a campaign's id) the strict peer accepted, counted per endpoint. */
export function pushesOf(peer: PushPeer, notificationId: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const message of peer.received()) {
    if ((JSON.parse(message.plaintext.toString()) as { notificationId: string }).notificationId !== notificationId) continue;
    counts.set(message.endpoint, (counts.get(message.endpoint) ?? 0) + 1);
  }
  return counts;
}

export async function eventually<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not reached in ${timeoutMs} ms; last value ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
