import { createHmac } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { EngagementTokens, type EngagementSubject } from '@herald/domain';
import { startPushPeer, type PushPeer, type PushPeerOptions, type ReceivedMessage } from '@herald/push-peer';
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

/** `peerOptions` change the push peer (e.g. a key pool whose endpoints exist without being created). */
export async function startSendingHarness(options: StackOptions = {}, peerOptions: PushPeerOptions = {}): Promise<SendingHarness> {
  const peer = await startPushPeer({ tls: true, ...peerOptions });
  const caFile = join(await mkdtemp(join(tmpdir(), 'herald-peer-')), 'ca.pem');
  await writeFile(caFile, peer.ca ?? '');
  // A stack that cannot start must not leave the peer listening: it would keep the process alive.
  const stack = await startStack({
    ...options,
    sending: true,
    gatewayEnv: { ALLOW_ANY_PUSH_SERVICE: 'true', ...options.gatewayEnv },
    deliveryEnv: { PUSH_CA_FILE: caFile, RETRY_POLL_MS: '50', PUSH_RETRY_BASE_MS: '100', ...options.deliveryEnv },
  }).catch(async (err: unknown) => {
    await peer.close();
    throw err;
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
  subscribers: Subscribed[];
}

export interface Subscribed {
  id: string;
  endpoint: string;
  keys: { p256dh: string; auth: string };
  externalId: string;
  tags: string[];
}

/** The workspace's identity-verification secret, read (made, the first time) with its dashboard key. */
export async function identitySecret(gatewayUrl: string, workspace: Pick<TestWorkspace, 'apiKey'>): Promise<string> {
  const response = await call<{ secret: string }>(gatewayUrl, `${SERVER_API}/identity-verification/secret`, { key: workspace.apiKey });
  if (response.status !== 200) throw new Error(`identity-verification secret answered ${response.status}: ${JSON.stringify(response.body)}`);
  return response.body.secret;
}

/** What a site's backend computes to prove an external id: HMAC-SHA256 (hex) under the identity-verification secret. */
export const externalIdProof = (secret: string, externalId: string): string => createHmac('sha256', secret).update(externalId, 'utf8').digest('hex');

/**
 * One more browser of the strict peer subscribed to the audience's site through the public SDK
 * endpoint. `proof`: the external id's identity-verification proof (a verified subscriber, an
 * approver device that receives questions); without it the external id is stored unverified.
 */
export async function subscribeBrowser(
  harness: SendingHarness,
  audience: Pick<Audience, 'workspace' | 'vapidPublicKey'>,
  { externalId, tags, proof }: { externalId: string; tags: string[]; proof?: string },
): Promise<Subscribed> {
  const subscription = harness.peer.createSubscription({ applicationServerKey: audience.vapidPublicKey });
  const response = await call<{ subscriberId: string }>(harness.stack.gatewayUrl, '/api/v1/subscribe', {
    method: 'POST',
    key: audience.workspace.siteKey,
    headers: { origin: 'https://shop.example.test' },
    body: { endpoint: subscription.endpoint, keys: subscription.keys, externalId, tags, ...(proof === undefined ? {} : { externalIdProof: proof }) },
  });
  if (response.status !== 201) throw new Error(`subscribe answered ${response.status}: ${JSON.stringify(response.body)}`);
  return { id: response.body.subscriberId, endpoint: subscription.endpoint, keys: subscription.keys, externalId, tags };
}

/**
 * A workspace with `count` browser subscribers registered through the public SDK endpoint. A
 * subscriber described `verified` subscribes with its external id's proof (an approver device).
 */
export async function seedAudience(
  harness: SendingHarness,
  count: number,
  plan = 'growth',
  describe: (index: number) => { externalId: string; tags: string[]; verified?: boolean } = (index) => ({ externalId: `user-${index}`, tags: [] }),
): Promise<Audience> {
  const workspace = await createWorkspace(plan, 'shop.example.test');
  const site = await call<{ vapidPublicKey: string }>(harness.stack.gatewayUrl, `${SERVER_API}/site`, { key: workspace.apiKey });
  const vapidPublicKey = site.body.vapidPublicKey;
  const subscribers: Subscribed[] = [];
  let secret: string | undefined;
  for (let index = 0; index < count; index += 1) {
    const { verified = false, ...described } = describe(index);
    if (verified) secret ??= await identitySecret(harness.stack.gatewayUrl, workspace);
    const proof = verified && secret !== undefined ? externalIdProof(secret, described.externalId) : undefined;
    subscribers.push(await subscribeBrowser(harness, { workspace, vapidPublicKey }, { ...described, ...(proof === undefined ? {} : { proof }) }));
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
