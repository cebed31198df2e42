import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { GetWebhookSecretsResponse } from '@herald/proto/herald/account/v1/account';
import { Type, type TString } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { Nullable, orNull, withErrors } from '../schemas/common.js';

/**
 * The workspace's rotatable secrets, kept by the account service: the webhook signing secret
 * (Standard Webhooks) and the identity-verification secret (a site's backend proves its users'
 * external ids with it). Both need the `webhooks` scope: dashboard keys only.
 */

const secretRecord = (secret: TString, rotation: string) =>
  Type.Object({
    secret,
    createdAt: Type.String({ description: 'When the current secret was made' }),
    previousSecretExpiresAt: Nullable(Type.String({ description: `Until when the previous secret still ${rotation} (24 h after a rotation); null when there is none` })),
  });

const WebhookSecret = secretRecord(Type.String({ pattern: '^whsec_[A-Za-z0-9+/]{43}=$', description: 'The current signing secret, whsec_<base64 of 32 bytes>' }), 'signs');
const IdentitySecret = secretRecord(
  Type.String({
    pattern: '^idsec_[A-Za-z0-9_-]{43}$',
    description: "The current identity-verification secret, idsec_<base64url of 32 bytes>: a proof of an external id is HMAC-SHA256 (hex) of the id with this whole string as the key. Keep it on the site's backend only.",
  }),
  'proves external ids',
);

function current({ secrets, createdAt, previousSecretExpiresAt }: GetWebhookSecretsResponse) {
  const [secret] = secrets;
  if (secret === undefined) throw new Error('account service returned no secret');
  return { secret, createdAt, previousSecretExpiresAt: orNull(previousSecretExpiresAt) };
}

export const webhookRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    const config = { access: { scope: 'webhooks' as const } };
    app.get(
      '/webhooks/secret',
      { config, schema: { tags: ['Webhooks'], operationId: 'getWebhookSecret', summary: "Read the workspace's webhook signing secret", response: withErrors({ 200: WebhookSecret }) } },
      async (request) => current(await clients.account.getWebhookSecrets({ workspaceId: principalOf(request).workspaceId })),
    );

    app.post(
      '/webhooks/secret/rotate',
      { config, schema: { tags: ['Webhooks'], operationId: 'rotateWebhookSecret', summary: 'Rotate the webhook signing secret (the previous one signs for 24 h more)', response: withErrors({ 200: WebhookSecret }) } },
      async (request) => current(await clients.account.rotateWebhookSecret({ workspaceId: principalOf(request).workspaceId })),
    );

    app.get(
      '/identity-verification/secret',
      {
        config,
        schema: {
          tags: ['Identity verification'],
          operationId: 'getIdentitySecret',
          summary: "Read the workspace's identity-verification secret (the first read makes it)",
          description:
            "A site's backend signs a user's externalId with it (HMAC-SHA256, hex) and the browser SDK passes the proof to POST /api/v1/subscribe: only a proven externalId makes the browser an approver device.",
          response: withErrors({ 200: IdentitySecret }),
        },
      },
      async (request) => current(await clients.account.getIdentitySecrets({ workspaceId: principalOf(request).workspaceId })),
    );

    app.post(
      '/identity-verification/secret/rotate',
      {
        config,
        schema: {
          tags: ['Identity verification'],
          operationId: 'rotateIdentitySecret',
          summary: 'Rotate the identity-verification secret (proofs made with the previous one are accepted for 24 h more)',
          response: withErrors({ 200: IdentitySecret }),
        },
      },
      async (request) => current(await clients.account.rotateIdentitySecret({ workspaceId: principalOf(request).workspaceId })),
    );
  };
