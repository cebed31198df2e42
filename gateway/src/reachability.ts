import type { ServiceClients } from './clients.js';

type Counted = { nativeAppDevices: number; browserSubscriptions: number; reachable: boolean };

/**
 * Live channels (GET /channels, GET /reachability, POST /decisions): `user`, one end-user's
 * approver devices (browsers whose external id is verified); `team`, every approver device of the
 * workspace; `site`, the whole audience (every active browser subscription).
 */
export interface ChannelCounts {
  user: Counted;
  team: Counted;
  site: Counted;
}

const counted = (nativeAppDevices: number, browserSubscriptions: number) => ({
  nativeAppDevices,
  browserSubscriptions,
  reachable: nativeAppDevices + browserSubscriptions > 0,
});

/** Paired, unrevoked devices (account service) and active browser subscribers, verified or all (audience service). */
export async function countChannels(clients: Pick<ServiceClients, 'account' | 'audience'>, workspaceId: string, externalId: string): Promise<ChannelCounts> {
  const [devices, subscriptions] = await Promise.all([
    clients.account.countDevices({ workspaceId, externalId }),
    clients.audience.countSubscriptions({ workspaceId, externalId }),
  ]);
  return {
    user: counted(Number(devices.externalIdDevices), Number(subscriptions.externalIdActive)),
    team: counted(Number(devices.siteDevices), Number(subscriptions.siteVerified)),
    site: counted(Number(devices.siteDevices), Number(subscriptions.siteActive)),
  };
}
