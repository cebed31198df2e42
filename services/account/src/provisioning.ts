import { generateKeyPairSync } from 'node:crypto';

import type { Pool } from '@herald/db';
import { formatFullKey, hashSecret, newSecret, randomId, scopesForOrigin, type KeyOrigin, type PlanName } from '@herald/domain';
import { HeraldError } from '@herald/errors';

import * as store from './store.js';

/** Creating workspaces and keys: secrets are generated here and leave only in the return value. */

interface VapidKeys {
  /** Uncompressed P-256 point (65 bytes), base64url: what browsers pass as applicationServerKey. */
  publicKey: string;
  /** Private scalar (32 bytes), base64url. */
  privateKey: string;
}

function generateVapidKeys(): VapidKeys {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const jwk = privateKey.export({ format: 'jwk' });
  if (!jwk.x || !jwk.y || !jwk.d) throw new Error('P-256 key export lacks coordinates');
  const point = Buffer.concat([Buffer.from([4]), Buffer.from(jwk.x, 'base64url'), Buffer.from(jwk.y, 'base64url')]);
  return { publicKey: point.toString('base64url'), privateKey: jwk.d };
}

const hostnamePattern = /^(?=.{1,253}$)(localhost|(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}|(?:\d{1,3}\.){3}\d{1,3})(?::\d{1,5})?$/;

function normaliseDomain(domain: string): string {
  const value = domain.trim().toLowerCase().replace(/^https?:\/\//, '').replace(/\/+$/, '');
  if (!hostnamePattern.test(value)) {
    throw new HeraldError('invalid_request', `"${domain}" is not a domain name (e.g. example.com or localhost:3000).`);
  }
  return value;
}

function slugFor(name: string): string {
  const base = name
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40);
  // A random suffix keeps slugs unique without a read-then-write race.
  return `${base || 'site'}-${randomId(6)}`;
}

export interface CreatedWorkspace {
  workspaceId: string;
  siteId: string;
  siteSlug: string;
  siteKey: string;
  apiKey: string;
}

export async function provisionWorkspace(
  pool: Pool,
  input: { name: string; plan: PlanName; domain: string; ownerExternalId?: string; approvalMode?: 'browser' | 'terminal' },
): Promise<CreatedWorkspace> {
  const name = input.name.trim();
  if (name.length === 0 || name.length > 200) throw new HeraldError('invalid_request', 'A workspace name is 1 to 200 characters.');
  const workspaceId = `ws_${randomId()}`;
  const siteId = `site_${randomId()}`;
  const siteSlug = slugFor(name);
  const siteKey = `pk_${randomId()}`;
  const vapid = generateVapidKeys();
  await store.createWorkspace(pool, {
    workspace: {
      id: workspaceId,
      name,
      plan: input.plan,
      ownerExternalId: input.ownerExternalId ?? 'owner',
      approvalMode: input.approvalMode ?? 'browser',
    },
    site: {
      id: siteId,
      slug: siteSlug,
      domain: normaliseDomain(input.domain),
      siteKey,
      vapidPublicKey: vapid.publicKey,
      vapidPrivateKey: vapid.privateKey,
    },
  });
  const { apiKey } = await issueKey(pool, { workspaceId, origin: 'dashboard', name: 'Default dashboard key' });
  return { workspaceId, siteId, siteSlug, siteKey, apiKey };
}

export async function issueKey(
  pool: Pool,
  input: { workspaceId: string; origin: KeyOrigin; name?: string; boundExternalId?: string; expiresAt?: Date },
): Promise<{ keyId: string; apiKey: string }> {
  const keyId = randomId();
  const secret = newSecret();
  const created = await store.createKey(pool, {
    id: keyId,
    workspaceId: input.workspaceId,
    name: input.name ?? `${input.origin} key`,
    origin: input.origin,
    scopes: scopesForOrigin(input.origin),
    boundExternalId: input.boundExternalId ?? null,
    secretHash: hashSecret(secret),
    expiresAt: input.expiresAt ?? null,
  });
  if (!created) throw new HeraldError('not_found', `No workspace ${input.workspaceId}.`);
  return { keyId, apiKey: formatFullKey(keyId, secret) };
}
