import { randomBytes } from 'node:crypto';

import type { Pool } from '@herald/db';
import { HeraldError } from '@herald/errors';
import type {
  GetIdentitySecretsRequest,
  GetIdentitySecretsResponse,
  GetWebhookSecretsRequest,
  GetWebhookSecretsResponse,
  RotateIdentitySecretRequest,
  RotateIdentitySecretResponse,
  RotateWebhookSecretRequest,
  RotateWebhookSecretResponse,
} from '@herald/proto/herald/account/v1/account';

import { toIso } from './messages.js';
import * as store from './store.js';

/**
 * The workspace's rotatable secrets: the webhook signing secret (Standard Webhooks), used by every
 * service that sends webhooks, and the identity-verification secret a site's backend proves its
 * users' external ids with (checked by the gateway, see ResolveSiteKey).
 */

/** How long a replaced secret stays usable, so receivers (or a site's backends) can switch without a gap. */
const ROTATION_GRACE_SECONDS = 86_400;

/** Standard Webhooks' secret format: whsec_ and base64 of the HMAC key (256 random bits). */
const newWebhookSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;
/** idsec_ and base64url of 256 random bits; the whole string is the HMAC key of a proof. */
const newIdentitySecret = (): string => `idsec_${randomBytes(32).toString('base64url')}`;

function toResponse(workspaceId: string, rows: store.SecretRow[]): GetWebhookSecretsResponse & GetIdentitySecretsResponse {
  const [current, previous] = rows;
  if (!current) throw new HeraldError('not_found', `No workspace ${workspaceId}.`);
  return { secrets: rows.map((row) => row.secret), createdAt: current.created_at.toISOString(), previousSecretExpiresAt: toIso(previous?.expires_at ?? null) };
}

export function secretHandlers(pool: Pool) {
  return {
    async getWebhookSecrets({ workspaceId }: GetWebhookSecretsRequest): Promise<GetWebhookSecretsResponse> {
      return toResponse(workspaceId, await store.secrets(pool, 'webhook_secrets', workspaceId, newWebhookSecret()));
    },

    async rotateWebhookSecret({ workspaceId }: RotateWebhookSecretRequest): Promise<RotateWebhookSecretResponse> {
      return toResponse(workspaceId, await store.rotateSecret(pool, 'webhook_secrets', workspaceId, newWebhookSecret(), ROTATION_GRACE_SECONDS));
    },

    async getIdentitySecrets({ workspaceId }: GetIdentitySecretsRequest): Promise<GetIdentitySecretsResponse> {
      return toResponse(workspaceId, await store.secrets(pool, 'identity_secrets', workspaceId, newIdentitySecret()));
    },

    async rotateIdentitySecret({ workspaceId }: RotateIdentitySecretRequest): Promise<RotateIdentitySecretResponse> {
      return toResponse(workspaceId, await store.rotateSecret(pool, 'identity_secrets', workspaceId, newIdentitySecret(), ROTATION_GRACE_SECONDS));
    },
  };
}
