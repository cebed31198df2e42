// What the k6 scripts cannot do themselves: workspaces and keys through the operator CLI's own
// commands (`npm run admin`'s code, run as a library with one pool; it needs the DATABASE_URL of
// the Herald under load), and the push keys subscriber endpoints carry. The result is the JSON file
// every script reads (HERALD_PROVISION). `retire` moves the file's workspaces to plan `none`, so
// keys a run leaves behind can no longer use the API or send.
import { readFile } from 'node:fs/promises';
import { get as httpsGet } from 'node:https';

import { openAdmin, type Admin } from '@herald/account/admin';
import { planFacts } from '@herald/domain';
import type { KeyPoolEntry } from '@herald/push-peer';
import { pushSubscription, type TestWorkspace } from '@herald/testkit';

import type { Provision, PushKeys } from './k6/lib/provision-file.js';

/** The domain every load workspace registers; subscribes come from this origin. */
export const SITE_DOMAIN = 'load.example.test';
/** Push key pairs written when no push peer is given (endpoints then lead nowhere). */
const LOCAL_KEYS = 16;

export interface PushPeer {
  /** The peer's origin (https://127.0.0.1:<port>); its endpoint /push/<n> uses pool key n. */
  readonly origin: string;
  /** Its CA, which fetch cannot be given. */
  readonly caFile: string | undefined;
}

/** GET over HTTPS trusting the push peer's own CA. */
async function peerJson<T>(url: string, caFile: string | undefined): Promise<T> {
  const ca = caFile === undefined ? undefined : await readFile(caFile, 'utf8');
  return new Promise((resolve, reject) => {
    const request = httpsGet(url, { ca, timeout: 10_000 }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => {
        if (response.statusCode !== 200) reject(new Error(`${url} answered ${response.statusCode}: ${text.slice(0, 200)}`));
        else resolve(JSON.parse(text) as T);
      });
    });
    request.on('timeout', () => request.destroy(new Error(`${url}: no answer in 10 s`)));
    request.on('error', reject);
  });
}

async function pushKeys(peer: PushPeer | undefined): Promise<Provision['push']> {
  if (!peer) return { origin: null, keys: Array.from({ length: LOCAL_KEYS }, () => pushSubscription().keys) };
  const host = new URL(peer.origin).hostname;
  if (host !== '127.0.0.1' && host !== 'localhost') throw new Error(`the push peer ${peer.origin} is not on this machine`);
  const { keys } = await peerJson<{ keys: Pick<KeyPoolEntry, 'p256dh' | 'auth'>[] }>(`${peer.origin}/__peer/key-pool`, peer.caFile);
  return { origin: peer.origin, keys: keys.map(({ p256dh, auth }): PushKeys => ({ p256dh, auth })) };
}

/** Every journey's workspaces and keys, sized for the full forms (the smoke forms use the first ones). */
export async function provision(databaseUrl: string, peer?: PushPeer): Promise<Provision> {
  const admin = await openAdmin(databaseUrl);
  const workspaces: string[] = [];
  const stamp = `${process.pid}-${Date.now().toString(36)}`;
  try {
    const workspace = async (journey: string, plan: string): Promise<TestWorkspace> => {
      const created = (await admin.run(['workspace', 'create', '--name', `Load ${journey} ${stamp}`, '--plan', plan, '--domain', SITE_DOMAIN])) as unknown as TestWorkspace;
      workspaces.push(created.workspaceId);
      return created;
    };
    const keys = async (journey: string, plan: string, count: number): Promise<string[]> => {
      const { workspaceId, apiKey } = await workspace(journey, plan);
      const more: string[] = [];
      for (let index = 1; index < count; index += 1) {
        const { apiKey: key } = await admin.run(['key', 'create', '--workspace', workspaceId, '--origin', 'dashboard', '--name', `load-${index}`]);
        if (typeof key !== 'string') throw new Error('key create returned no apiKey');
        more.push(key);
      }
      return [apiKey, ...more];
    };
    const identity = await workspace('identity', 'free');
    const sites: string[] = [];
    for (let site = 0; site < 4; site += 1) sites.push((await workspace('subscribe', 'enterprise')).siteKey);
    const send = await workspace('send', 'enterprise');
    const campaign = await workspace('campaign', 'enterprise');
    const engagement = await workspace('engagement', 'enterprise');
    return {
      version: 1,
      createdAt: new Date().toISOString(),
      siteOrigin: `https://${SITE_DOMAIN}`,
      push: await pushKeys(peer),
      workspaces,
      identity: { workspaceId: identity.workspaceId, apiKey: identity.apiKey, limitPerMinute: planFacts('free').rateLimitPerMinute },
      subscribe: { siteKeys: sites },
      send: { apiKey: send.apiKey, siteKey: send.siteKey },
      campaign: { apiKey: campaign.apiKey, siteKey: campaign.siteKey },
      engagement: { workspaceId: engagement.workspaceId, siteId: engagement.siteId, apiKey: engagement.apiKey, siteKey: engagement.siteKey },
      // One workspace per key: each key's person has an inbox of its own (two people reading one
      // inbox would race for the same questions, and every answer but the first is a 409).
      approval: { keys: [(await workspace('approval', 'enterprise')).apiKey, (await workspace('approval', 'enterprise')).apiKey] },
      authorize: { keys: await keys('authorize', 'partner', 4) },
      mcp: { keys: await keys('mcp', 'enterprise', 2) },
    };
  } catch (err) {
    await retireWorkspaces(admin, workspaces);
    throw err;
  } finally {
    await admin.close();
  }
}

async function retireWorkspaces(admin: Admin, workspaces: readonly string[]): Promise<void> {
  for (const workspaceId of workspaces) await admin.run(['workspace', 'set-plan', '--workspace', workspaceId, '--plan', 'none']);
}

/** The provisioned workspaces move to plan `none`. */
export async function retire(databaseUrl: string, provisioned: Pick<Provision, 'workspaces'>): Promise<void> {
  const admin = await openAdmin(databaseUrl);
  try {
    await retireWorkspaces(admin, provisioned.workspaces);
  } finally {
    await admin.close();
  }
}
