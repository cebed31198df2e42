import type { Bus } from '@herald/bus';
import type { FastifyInstance } from 'fastify';

import type { ServiceClients } from '../clients.js';
import type { GatewayConfig } from '../config.js';
import { mcpRoutes } from '../mcp/server.js';
import { API_PREFIX, PUBLIC_PREFIX } from '../prefixes.js';
import type { RateLimiter } from '../rate-limit.js';
import type { Waiters } from '../waiters.js';
import { accountRoutes } from './account.js';
import { answerPageRoutes } from './answer-page.js';
import { askRoutes } from './ask.js';
import { browserSdkRoutes } from './browser-sdk.js';
import { campaignRoutes } from './campaigns.js';
import { consoleRoutes, loadConsoleBuild } from './console.js';
import { decisionStreamRoutes } from './decision-stream.js';
import { decisionRoutes } from './decisions.js';
import { deviceRoutes } from './devices.js';
import { emailLinkRoutes } from './email-links.js';
import { engagementRoutes } from './engagement.js';
import { enrollmentPageRoutes, enrollRoutes } from './enroll.js';
import { flowRoutes } from './flows.js';
import { keyRoutes } from './keys.js';
import { memberRoutes } from './members.js';
import { notificationRoutes } from './notifications.js';
import { passkeyPageRoutes, passkeyRoutes } from './passkeys.js';
import { policyRoutes } from './policy.js';
import { publicRoutes } from './public.js';
import { segmentRoutes } from './segments.js';
import { slackInteractionRoutes, slackRoutes } from './slack.js';
import { sessionRoutes, signInRoutes } from './sessions.js';
import { ssoConfigRoutes, ssoSignInRoutes } from './sso.js';
import { subscriberRoutes } from './subscribers.js';
import { templateRoutes } from './templates.js';
import { webhookRoutes } from './webhooks.js';

export interface RouteDependencies {
  config: GatewayConfig;
  clients: ServiceClients;
  limiter: RateLimiter;
  waiters: Waiters;
  bus: Bus;
}

/** Every route of the gateway, one module per resource. A new resource is its module plus one line here. */
export async function registerRoutes(app: FastifyInstance, { config, clients, limiter, waiters, bus }: RouteDependencies): Promise<void> {
  const questions = { clients, waiters, publicOrigin: config.publicOrigin };
  const pages = { clients, config, limiter };
  await app.register(accountRoutes(clients), { prefix: API_PREFIX });
  await app.register(subscriberRoutes(clients), { prefix: API_PREFIX });
  await app.register(segmentRoutes(clients), { prefix: API_PREFIX });
  await app.register(publicRoutes(pages), { prefix: PUBLIC_PREFIX });
  await app.register(engagementRoutes({ config, limiter, bus }), { prefix: PUBLIC_PREFIX });
  await app.register(notificationRoutes(clients), { prefix: API_PREFIX });
  await app.register(policyRoutes(clients), { prefix: API_PREFIX });
  await app.register(webhookRoutes(clients), { prefix: API_PREFIX });
  await app.register(slackRoutes(clients), { prefix: API_PREFIX });
  await app.register(slackInteractionRoutes(clients), { prefix: PUBLIC_PREFIX });
  await app.register(campaignRoutes(clients), { prefix: API_PREFIX });
  await app.register(templateRoutes(clients), { prefix: API_PREFIX });
  await app.register(flowRoutes(clients), { prefix: API_PREFIX });
  await app.register(askRoutes(questions), { prefix: API_PREFIX });
  await app.register(decisionStreamRoutes({ ...questions, streamsPerWorkspace: config.decisionStreamsPerWorkspace, heartbeatMs: config.decisionStreamHeartbeatMs }), { prefix: API_PREFIX });
  await app.register(decisionRoutes(questions), { prefix: API_PREFIX });
  await app.register(answerPageRoutes({ ...questions, limiter, ipRateLimitPerMinute: config.ipRateLimitPerMinute }));
  await app.register(emailLinkRoutes({ clients, publicOrigin: config.publicOrigin, limiter, ipRateLimitPerMinute: config.ipRateLimitPerMinute }));
  await app.register(keyRoutes(clients), { prefix: API_PREFIX });
  await app.register(enrollRoutes(clients), { prefix: API_PREFIX });
  await app.register(enrollmentPageRoutes(pages));
  await app.register(memberRoutes(clients), { prefix: API_PREFIX });
  await app.register(sessionRoutes(pages), { prefix: API_PREFIX });
  await app.register(signInRoutes(pages));
  await app.register(passkeyRoutes(pages), { prefix: API_PREFIX });
  await app.register(deviceRoutes(pages), { prefix: API_PREFIX });
  await app.register(passkeyPageRoutes());
  await app.register(ssoConfigRoutes(pages), { prefix: API_PREFIX });
  await app.register(ssoSignInRoutes(pages));
  await app.register(browserSdkRoutes(pages));
  await app.register(consoleRoutes(loadConsoleBuild()));
  await app.register(
    mcpRoutes({
      publicOrigin: config.publicOrigin,
      apiPrefix: API_PREFIX,
      authorizationServer: config.oauthAuthorizationServer,
      limiter,
      ipRateLimitPerMinute: config.ipRateLimitPerMinute,
      allowedOrigins: config.mcpAllowedOrigins,
      responseLimitBytes: config.mcpResponseLimitBytes,
    }),
  );
}
