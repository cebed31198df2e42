import { channelCounts, type ChannelCounts } from '@herald/domain';

import type { ServiceClients } from './clients.js';

/** Paired, unrevoked devices (account service) and active browser subscribers, verified or all (audience service). */
export async function countChannels(clients: Pick<ServiceClients, 'account' | 'audience'>, workspaceId: string, externalId: string): Promise<ChannelCounts> {
  const [devices, subscriptions] = await Promise.all([
    clients.account.countDevices({ workspaceId, externalId }),
    clients.audience.countSubscriptions({ workspaceId, externalId }),
  ]);
  return channelCounts(devices, subscriptions);
}
