import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { SlackConnection } from '@herald/proto/herald/decision/v1/slack';
import { Type } from '@sinclair/typebox';

import { principalOf } from '../access.js';
import type { ServiceClients } from '../clients.js';
import { ErrorResponse, withErrors } from '../schemas/common.js';

/**
 * Slack: the workspace's connection (PUT/GET/DELETE /channels/slack; the secrets go in and never
 * come out) and Slack's interactivity endpoint (POST /api/v1/slack/interactions, public: Slack's
 * v0 signature over the raw body authenticates it, checked by the decision service, which holds
 * the signing secret). See docs/slack.md.
 */

/** Slack's interactivity payloads are small; a modal's state is the largest (one 2,000-character answer). */
const INTERACTION_BODY_LIMIT = 131_072;

const SlackId = (prefix: string, description: string) => Type.String({ pattern: `^${prefix}[A-Z0-9]{2,30}$`, description });

const ConnectBody = Type.Object(
  {
    botToken: Type.String({ pattern: '^xoxb-[A-Za-z0-9-]{1,250}$', description: "The app's Bot User OAuth Token (xoxb-...), checked with Slack's auth.test" }),
    signingSecret: Type.String({ pattern: '^[0-9a-f]{32,64}$', description: "The app's Signing Secret (Basic Information page): verifies Slack's interactivity requests" }),
    defaultChannel: SlackId('[CG]', 'The channel id (C...) questions without Slack approvers are posted to; the app must be a member'),
  },
  { additionalProperties: false },
);

const SlackConnectionRecord = Type.Object({
  teamId: Type.String({ description: 'The Slack team (workspace) id, from auth.test' }),
  teamName: Type.String(),
  botUserId: Type.String({ description: "The app's bot user id" }),
  defaultChannel: Type.String(),
  connectedAt: Type.String(),
});

function record(connection: SlackConnection | undefined) {
  if (!connection) throw new Error('decision service returned no slack connection');
  return connection;
}

export const slackRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    // Workspace settings holding secrets: dashboard keys, owners and admins (like the webhook secret).
    const config = { access: { scope: 'webhooks' as const } };
    app.put(
      '/channels/slack',
      {
        config,
        schema: {
          tags: ['Slack'],
          operationId: 'connectSlack',
          summary: 'Connect a Slack app (bot token, signing secret, default channel); replaces the previous connection',
          body: ConnectBody,
          response: withErrors({ 200: SlackConnectionRecord, 409: ErrorResponse, 503: ErrorResponse }),
        },
      },
      async (request) => {
        const { botToken, signingSecret, defaultChannel } = request.body;
        return record((await clients.slack.connectSlack({ workspaceId: principalOf(request).workspaceId, botToken, signingSecret, defaultChannel })).connection);
      },
    );
    app.get(
      '/channels/slack',
      { config, schema: { tags: ['Slack'], operationId: 'getSlackConnection', summary: "Read the workspace's Slack connection (never its secrets)", response: withErrors({ 200: SlackConnectionRecord }) } },
      async (request) => record((await clients.slack.getSlackConnection({ workspaceId: principalOf(request).workspaceId })).connection),
    );
    app.delete(
      '/channels/slack',
      { config, schema: { tags: ['Slack'], operationId: 'disconnectSlack', summary: 'Disconnect Slack: questions are no longer posted there', response: withErrors({ 204: Type.Null() }) } },
      async (request, reply) => {
        await clients.slack.disconnectSlack({ workspaceId: principalOf(request).workspaceId });
        return reply.code(204).send(null);
      },
    );
  };

/** Slack's interactivity requests (Request URL of the app's Interactivity & Shortcuts page). */
export const slackInteractionRoutes =
  (clients: ServiceClients): FastifyPluginAsyncTypebox =>
  async (app) => {
    // The raw body, unparsed: Slack's signature is over its exact bytes.
    app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer', bodyLimit: INTERACTION_BODY_LIMIT }, (_request, body, done) => done(null, body));
    app.post(
      '/slack/interactions',
      {
        config: { access: { public: true } },
        schema: {
          tags: ['Slack'],
          operationId: 'slackInteraction',
          summary: "Slack's interactivity requests (button clicks, modal submissions), signed with the app's signing secret",
          headers: Type.Object({
            'x-slack-request-timestamp': Type.Optional(Type.String({ maxLength: 20 })),
            'x-slack-signature': Type.Optional(Type.String({ maxLength: 100 })),
          }),
          response: {
            200: Type.String({ description: "Empty (acknowledged), or Slack's view response as JSON (response_action)" }),
            400: ErrorResponse,
            401: ErrorResponse,
            403: ErrorResponse,
            404: ErrorResponse,
            415: ErrorResponse,
          },
        },
      },
      async (request, reply) => {
        const rawBody = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        const { bodyJson } = await clients.slack.handleSlackInteraction({
          rawBody,
          timestamp: request.headers['x-slack-request-timestamp'] ?? '',
          signature: request.headers['x-slack-signature'] ?? '',
        });
        // Sent as given: an empty acknowledgement, or the JSON Slack reads a modal's errors from.
        return reply
          .code(200)
          .type(bodyJson === '' ? 'text/plain; charset=utf-8' : 'application/json; charset=utf-8')
          .serializer((payload) => String(payload))
          .send(bodyJson);
      },
    );
  };
