import type { ServiceClients } from './clients.js';

/** Live channels of one end-user and of the whole site (GET /channels, GET /reachability, POST /decisions). */
export interface ChannelCounts {
  user: { nativeAppDevices: number; browserSubscriptions: number; reachable: boolean };
  site: { nativeAppDevices: number; browserSubscriptions: number; reachable: boolean };
}

const counted = (nativeAppDevices: number, browserSubscriptions: number) => ({
  nativeAppDevices,
  browserSubscriptions,
  reachable: nativeAppDevices + browserSubscriptions > 0,
});

/** Paired, unrevoked devices (account service) and active browser subscribers (audience service). */
export async function countChannels(clients: Pick<ServiceClients, 'account' | 'audience'>, workspaceId: string, externalId: string): Promise<ChannelCounts> {
  const [devices, subscriptions] = await Promise.all([
    clients.account.countDevices({ workspaceId, externalId }),
    clients.audience.countSubscriptions({ workspaceId, externalId }),
  ]);
  return {
    user: counted(Number(devices.externalIdDevices), Number(subscriptions.externalIdActive)),
    site: counted(Number(devices.siteDevices), Number(subscriptions.siteActive)),
  };
}
