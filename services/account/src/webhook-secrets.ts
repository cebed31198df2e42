import { randomBytes } from 'node:crypto';

import type { Pool } from '@herald/db';
import { HeraldError } from '@herald/errors';
import type {
  GetWebhookSecretsRequest,
  GetWebhookSecretsResponse,
  RotateWebhookSecretRequest,
  RotateWebhookSecretResponse,
} from '@herald/proto/herald/account/v1/account';

import { toIso } from './messages.js';
import * as store from './store.js';

/** The workspace's webhook signing secrets (Standard Webhooks), used by every service that sends webhooks. */

/** How long a replaced secret keeps signing, so receivers can switch without dropping a webhook. */
const ROTATION_GRACE_SECONDS = 86_400;

/** Standard Webhooks' secret format: whsec_ and base64 of the HMAC key (256 random bits). */
const newWebhookSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

function toResponse(workspaceId: string, rows: store.WebhookSecretRow[]): GetWebhookSecretsResponse {
  const [current, previous] = rows;
  if (!current) throw new HeraldError('not_found', `No workspace ${workspaceId}.`);
  return { secrets: rows.map((row) => row.secret), createdAt: current.created_at.toISOString(), previousSecretExpiresAt: toIso(previous?.expires_at ?? null) };
}

export function webhookSecretHandlers(pool: Pool) {
  return {
    async getWebhookSecrets({ workspaceId }: GetWebhookSecretsRequest): Promise<GetWebhookSecretsResponse> {
      return toResponse(workspaceId, await store.webhookSecrets(pool, workspaceId, newWebhookSecret()));
    },

    async rotateWebhookSecret({ workspaceId }: RotateWebhookSecretRequest): Promise<RotateWebhookSecretResponse> {
      return toResponse(workspaceId, await store.rotateWebhookSecret(pool, workspaceId, newWebhookSecret(), ROTATION_GRACE_SECONDS));
    },
  };
}
