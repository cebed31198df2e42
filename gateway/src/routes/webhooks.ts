import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { GetWebhookSecretsResponse } from '@herald/proto/herald/account/v1/account';
import { Type } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { Nullable, orNull, withErrors } from '../schemas/common.js';

/** The workspace's webhook signing secret (Standard Webhooks), kept by the account service. */

const WebhookSecret = Type.Object({
  secret: Type.String({ pattern: '^whsec_[A-Za-z0-9+/]{43}=$', description: 'The current signing secret, whsec_<base64 of 32 bytes>' }),
  createdAt: Type.String({ description: 'When the current secret was made' }),
  previousSecretExpiresAt: Nullable(Type.String({ description: 'Until when the previous secret still signs (24 h after a rotation); null when there is none' })),
});

function webhookSecret({ secrets, createdAt, previousSecretExpiresAt }: GetWebhookSecretsResponse) {
  const [secret] = secrets;
  if (secret === undefined) throw new Error('account service returned no webhook secret');
  return { secret, createdAt, previousSecretExpiresAt: orNull(previousSecretExpiresAt) };
}

export const webhookRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.get(
      '/webhooks/secret',
      { config: { access: { scope: 'webhooks' } }, schema: { tags: ['Webhooks'], operationId: 'getWebhookSecret', summary: "Read the workspace's webhook signing secret", response: withErrors({ 200: WebhookSecret }) } },
      async (request) => webhookSecret(await clients.account.getWebhookSecrets({ workspaceId: principalOf(request).workspaceId })),
    );

    app.post(
      '/webhooks/secret/rotate',
      { config: { access: { scope: 'webhooks' } }, schema: { tags: ['Webhooks'], operationId: 'rotateWebhookSecret', summary: 'Rotate the webhook signing secret (the previous one signs for 24 h more)', response: withErrors({ 200: WebhookSecret }) } },
      async (request) => webhookSecret(await clients.account.rotateWebhookSecret({ workspaceId: principalOf(request).workspaceId })),
    );
  };
