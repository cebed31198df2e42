import type { ApiKey, PublicSite } from '@herald/proto/herald/account/v1/account';

import type { KeyRow, PublicSiteRow } from './store.js';

/** Rows to the messages several RPC groups answer with (proto3 strings are empty when unset). */

export const toIso = (value: Date | null): string => (value ? value.toISOString() : '');

export function toApiKeyMessage(key: KeyRow): ApiKey {
  return {
    id: key.id,
    name: key.name,
    origin: key.origin,
    scopes: key.scopes,
    boundExternalId: key.bound_external_id ?? '',
    revoked: key.revoked_at !== null,
    createdAt: key.created_at.toISOString(),
    lastUsedAt: toIso(key.last_used_at),
    expiresAt: toIso(key.expires_at),
    revokedAt: toIso(key.revoked_at),
  };
}

export function toPublicSiteMessage(site: PublicSiteRow): PublicSite {
  return {
    name: site.name,
    logoUrl: site.logo_url ?? '',
    domain: site.domain,
    siteKey: site.site_key,
    primaryColor: site.primary_color,
    buttonText: site.button_text,
    vapidPublicKey: site.vapid_public_key,
    slug: site.slug,
  };
}
