import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { ApiKey } from '@herald/proto/herald/account/v1/account';
import { Type } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { Nullable, orNull, withErrors } from '../schemas/common.js';
import { ExternalId } from '../schemas/subscribers.js';

/** POST/GET /keys and DELETE /keys/{keyId}: Partner keys bound to one end-user. */

const access = { scope: 'keys', plan: 'partner' } as const;

const BoundKeySummary = Type.Object({
  id: Type.String({ description: 'The <id> of pk_<id>.<secret>' }),
  name: Type.String(),
  externalId: Type.String({ description: 'The end-user the key acts for' }),
  createdAt: Type.String(),
  lastUsedAt: Nullable(Type.String({ description: 'Updated at most once a minute' })),
  expiresAt: Nullable(Type.String()),
  revoked: Type.Boolean(),
  revokedAt: Nullable(Type.String()),
});

function summary(key: ApiKey | undefined) {
  if (!key) throw new Error('account service returned no key');
  return {
    id: key.id,
    name: key.name,
    externalId: key.boundExternalId,
    createdAt: key.createdAt,
    lastUsedAt: orNull(key.lastUsedAt),
    expiresAt: orNull(key.expiresAt),
    revoked: key.revoked,
    revokedAt: orNull(key.revokedAt),
  };
}

export const keyRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    app.post(
      '/keys',
      {
        config: { access },
        schema: {
          tags: ['Keys'],
          operationId: 'createKey',
          summary: 'Issue an API key bound to one end-user (Partner)',
          body: Type.Object(
            {
              externalId: ExternalId,
              name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
              expiresInSeconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 31_536_000, description: 'Omitted: the key never expires' })),
            },
            { additionalProperties: false },
          ),
          response: withErrors({
            201: Type.Object({ key: BoundKeySummary, apiKey: Type.String({ description: 'pk_<id>.<secret>: shown once, never again' }) }),
          }),
        },
      },
      async (request, reply) => {
        const { externalId, name = '', expiresInSeconds = 0 } = request.body;
        const created = await clients.account.createBoundKey({ workspaceId: principalOf(request).workspaceId, externalId, name, expiresInSeconds });
        return reply.code(201).send({ key: summary(created.key), apiKey: created.apiKey });
      },
    );

    app.get(
      '/keys',
      {
        config: { access },
        schema: {
          tags: ['Keys'],
          operationId: 'listKeys',
          summary: 'List bound keys, revoked ones included (Partner)',
          querystring: Type.Object({ externalId: Type.Optional(ExternalId) }, { additionalProperties: false }),
          response: withErrors({ 200: Type.Object({ keys: Type.Array(BoundKeySummary) }) }),
        },
      },
      async (request) => {
        const { keys } = await clients.account.listBoundKeys({ workspaceId: principalOf(request).workspaceId, externalId: request.query.externalId ?? '' });
        return { keys: keys.map(summary) };
      },
    );

    app.delete(
      '/keys/:keyId',
      {
        config: { access },
        schema: {
          tags: ['Keys'],
          operationId: 'revokeKey',
          summary: 'Revoke a bound key (Partner)',
          params: Type.Object({ keyId: Type.String({ minLength: 1, maxLength: 100 }) }),
          response: withErrors({ 200: BoundKeySummary }),
        },
      },
      async (request) => {
        const { key } = await clients.account.revokeBoundKey({ workspaceId: principalOf(request).workspaceId, keyId: request.params.keyId });
        return summary(key);
      },
    );
  };
