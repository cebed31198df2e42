// The provisioning file `npm run load -- provision` writes and every script reads (HERALD_PROVISION,
// with open()): workspaces and keys made with the operator CLI, which k6 cannot run. Types only:
// the provisioner (loadtest/provision.ts) and the scripts share them.

export interface PushKeys {
  readonly p256dh: string;
  readonly auth: string;
}

export interface Provision {
  readonly version: 1;
  readonly createdAt: string;
  /** The origin every load workspace's site is registered for; subscribes come from it. */
  readonly siteOrigin: string;
  /**
   * Where subscriber endpoints point: a push peer's origin (its endpoint /push/<n> uses key n of
   * `keys`), or null: https://127.0.0.1:9/push/<n>, where nothing listens.
   */
  readonly push: { readonly origin: string | null; readonly keys: readonly PushKeys[] };
  /** Every workspace made, for `npm run load -- retire`. */
  readonly workspaces: readonly string[];
  readonly identity: { readonly workspaceId: string; readonly apiKey: string; readonly limitPerMinute: number };
  readonly subscribe: { readonly siteKeys: readonly string[] };
  readonly send: { readonly apiKey: string; readonly siteKey: string };
  readonly campaign: { readonly apiKey: string; readonly siteKey: string };
  readonly engagement: { readonly workspaceId: string; readonly siteId: string; readonly apiKey: string; readonly siteKey: string };
  /** One key per workspace: a person per key answers that workspace's pending questions. */
  readonly approval: { readonly keys: readonly string[] };
  readonly authorize: { readonly keys: readonly string[] };
  readonly mcp: { readonly keys: readonly string[] };
}

export type Journey = Exclude<keyof Provision, 'version' | 'createdAt' | 'siteOrigin' | 'push' | 'workspaces'>;

export const JOURNEY_NAMES: readonly Journey[] = ['identity', 'subscribe', 'send', 'campaign', 'engagement', 'approval', 'authorize', 'mcp'];
