import { createClient, type PromiseClient } from '@herald/grpc';
import { AccountServiceClient } from '@herald/proto/herald/account/v1/account';
import { AudienceServiceClient } from '@herald/proto/herald/audience/v1/audience';
import { SegmentServiceClient } from '@herald/proto/herald/audience/v1/segments';
import { CampaignServiceClient } from '@herald/proto/herald/campaign/v1/campaign';
import { DecisionServiceClient } from '@herald/proto/herald/decision/v1/decision';
import { SlackServiceClient } from '@herald/proto/herald/decision/v1/slack';
import { DeliveryServiceClient } from '@herald/proto/herald/delivery/v1/delivery';
import { FlowServiceClient } from '@herald/proto/herald/flow/v1/flow';
import { PolicyServiceClient } from '@herald/proto/herald/policy/v1/policy';
import { TemplateServiceClient } from '@herald/proto/herald/campaign/v1/templates';

import type { GatewayConfig } from './config.js';

/** gRPC clients of the services the gateway routes to; every call carries a deadline. */
export interface ServiceClients {
  account: PromiseClient<AccountServiceClient>;
  audience: PromiseClient<AudienceServiceClient>;
  /** Served by the audience service. */
  segments: PromiseClient<SegmentServiceClient>;
  campaign: PromiseClient<CampaignServiceClient>;
  /** Served by the campaign service. */
  templates: PromiseClient<TemplateServiceClient>;
  delivery: PromiseClient<DeliveryServiceClient>;
  policy: PromiseClient<PolicyServiceClient>;
  decision: PromiseClient<DecisionServiceClient>;
  /** Served by the decision service. */
  slack: PromiseClient<SlackServiceClient>;
  flow: PromiseClient<FlowServiceClient>;
}

export function createServiceClients(config: GatewayConfig): ServiceClients {
  return {
    account: createClient(AccountServiceClient, config.accountGrpcUrl, config.grpcDeadlineMs),
    audience: createClient(AudienceServiceClient, config.audienceGrpcUrl, config.grpcDeadlineMs),
    segments: createClient(SegmentServiceClient, config.audienceGrpcUrl, config.grpcDeadlineMs),
    campaign: createClient(CampaignServiceClient, config.campaignGrpcUrl, config.grpcDeadlineMs),
    templates: createClient(TemplateServiceClient, config.campaignGrpcUrl, config.grpcDeadlineMs),
    delivery: createClient(DeliveryServiceClient, config.deliveryGrpcUrl, config.grpcDeadlineMs),
    policy: createClient(PolicyServiceClient, config.policyGrpcUrl, config.grpcDeadlineMs),
    decision: createClient(DecisionServiceClient, config.decisionGrpcUrl, config.grpcDeadlineMs),
    slack: createClient(SlackServiceClient, config.decisionGrpcUrl, config.grpcDeadlineMs),
    flow: createClient(FlowServiceClient, config.flowGrpcUrl, config.grpcDeadlineMs),
  };
}

export function closeServiceClients(clients: ServiceClients): void {
  for (const client of Object.values(clients)) client.close();
}
