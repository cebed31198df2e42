import { createHmac, createPublicKey, timingSafeEqual } from 'node:crypto';

import { invalidFields, type FieldProblem } from '@herald/errors';

import type { ServiceClients } from './clients.js';
import type { GatewayConfig } from './config.js';
import type { SiteCaller } from './site-keys.js';

/** Push subscriptions as the browser SDK's subscribe and an enrollment link receive them: checked, then stored. */

type PushOptions = Pick<GatewayConfig, 'allowAnyPushService' | 'pushServiceHosts'>;

/** What the page may say about its subscriber besides the subscription. */
export interface SubscriberFields {
  externalId?: string;
  tags?: string[];
  browser?: string;
  os?: string;
  language?: string;
  timezone?: string;
}

/**
 * Stores a subscription checkPushSubscription accepted, with the page's metadata, for the site.
 * `externalIdVerified`: the external id was proven (checkExternalIdProof, or a pairing link).
 * `memberId`: a console member's own device, named from their session (POST /me/devices) only.
 */
export async function storeSubscription(
  clients: ServiceClients,
  site: { workspaceId: string; siteId: string },
  subscription: PushSubscriptionInput,
  body: SubscriberFields,
  externalIdVerified: boolean,
  memberId = '',
): Promise<{ subscriberId: string; created: boolean }> {
  return clients.audience.subscribe({
    externalIdVerified,
    memberId,
    workspaceId: site.workspaceId,
    siteId: site.siteId,
    endpoint: subscription.endpoint,
    keys: subscription.keys,
    externalId: body.externalId ?? '',
    tags: body.tags ?? [],
    browser: body.browser ?? '',
    os: body.os ?? '',
    language: body.language ?? '',
    timezone: body.timezone ?? '',
    country: '',
  });
}

const proofPattern = /^[0-9a-f]{64}$/i;

/** Whether `given` is HMAC-SHA256 of `externalId` under one of `secrets`; every secret is tried, in constant time each. */
function proves(secrets: string[], externalId: string, given: Buffer): boolean {
  let matched = false;
  for (const secret of secrets) {
    matched = timingSafeEqual(createHmac('sha256', secret).update(externalId, 'utf8').digest(), given) || matched;
  }
  return matched;
}

/**
 * Whether `proof` proves `externalId`: HMAC-SHA256 (hex) of the external id under one of the
 * workspace's identity-verification secrets (the current one, or the previous one during its
 * rotation grace), compared in constant time. A proof that is malformed, made with another
 * workspace's secret or for another id is a 400 naming externalIdProof: the site's backend has a
 * bug to fix, and storing the id unverified would hide it. No proof: false (stored unverified).
 *
 * Checked here, at the edge, because the secrets arrive with the site-key resolution the gateway
 * already caches (ResolveSiteKey): the audience service stays the one call, and stores what it is
 * told was proven, as it does for pairing links. A proof the cached secrets refuse is checked once
 * more against the account service's current ones, so a secret just made or rotated works at once.
 */
export async function checkExternalIdProof(site: SiteCaller, externalId: string | undefined, proof: string | undefined): Promise<boolean> {
  if (proof === undefined) return false;
  const problem = (text: string) => invalidFields('body', [{ field: 'externalIdProof', in: 'body', problem: text }]);
  if (externalId === undefined) throw problem('needs the externalId it proves');
  if (!proofPattern.test(proof)) throw problem('must be 64 hex characters: HMAC-SHA256 of externalId under the identity-verification secret');
  const given = Buffer.from(proof.toLowerCase(), 'hex');
  const matched = proves(site.identitySecrets, externalId, given) || proves(await site.freshIdentitySecrets(), externalId, given);
  if (!matched) throw problem('does not prove externalId: compute HMAC-SHA256 of externalId under the current identity-verification secret (GET /api/v1/server/identity-verification/secret)');
  return true;
}

const base64UrlPattern = /^[A-Za-z0-9_-]+={0,2}$/;

function decodeBase64Url(value: string): Buffer | undefined {
  return base64UrlPattern.test(value) ? Buffer.from(value.replace(/=+$/, ''), 'base64url') : undefined;
}

/** Whether an uncompressed point (0x04 ‖ x ‖ y, 65 bytes) is on the P-256 curve. */
function isOnP256(point: Buffer): boolean {
  try {
    createPublicKey({
      key: { kty: 'EC', crv: 'P-256', x: point.subarray(1, 33).toString('base64url'), y: point.subarray(33).toString('base64url') },
      format: 'jwk',
    });
    return true;
  } catch {
    return false;
  }
}

function endpointProblem(endpoint: string, options: PushOptions): string | undefined {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return 'must be an https URL';
  }
  if (url.protocol !== 'https:') return 'must be an https URL';
  if (url.username || url.password) return 'must not carry credentials';
  if (options.allowAnyPushService) return undefined;
  const host = url.hostname.toLowerCase();
  const known = options.pushServiceHosts.some((suffix) => host === suffix.toLowerCase() || host.endsWith(`.${suffix.toLowerCase()}`));
  return known ? undefined : `is not on a known push service (${options.pushServiceHosts.join(', ')})`;
}

export interface PushSubscriptionInput {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

/**
 * What the schema cannot say about a push subscription: an https endpoint on a push service, a
 * p256dh that is a P-256 point, an auth secret of 16 bytes. All problems in one 400; the keys come
 * back as unpadded base64url.
 */
export function checkPushSubscription(subscription: PushSubscriptionInput, prefix: string, options: PushOptions): PushSubscriptionInput {
  const problems: FieldProblem[] = [];
  const problem = (field: string, text: string) => problems.push({ field: `${prefix}${field}`, in: 'body', problem: text });
  const endpoint = endpointProblem(subscription.endpoint, options);
  if (endpoint) problem('endpoint', endpoint);
  const p256dh = decodeBase64Url(subscription.keys.p256dh);
  if (p256dh?.length !== 65 || p256dh[0] !== 4) problem('keys.p256dh', 'must be base64url of a 65-byte uncompressed P-256 point');
  else if (!isOnP256(p256dh)) problem('keys.p256dh', 'is not a point on the P-256 curve');
  const auth = decodeBase64Url(subscription.keys.auth);
  if (auth?.length !== 16) problem('keys.auth', 'must be base64url of exactly 16 bytes');
  if (problems.length > 0 || !p256dh || !auth) throw invalidFields('body', problems);
  return { endpoint: subscription.endpoint, keys: { p256dh: p256dh.toString('base64url'), auth: auth.toString('base64url') } };
}

