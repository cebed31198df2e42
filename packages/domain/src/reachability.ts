/** Live channels of one kind: paired devices and browser subscriptions, and whether there is any. */
export interface Channels {
  nativeAppDevices: number;
  browserSubscriptions: number;
  reachable: boolean;
}

/**
 * Who can be reached (GET /channels, GET /reachability, a decision's `reachability`): `user`, one
 * end-user's approver devices (browsers whose external id is verified); `team`, every approver
 * device of the workspace; `site`, the whole audience (every active browser subscription).
 */
export interface ChannelCounts {
  user: Channels;
  team: Channels;
  site: Channels;
}

const channels = (nativeAppDevices: number, browserSubscriptions: number): Channels => ({
  nativeAppDevices,
  browserSubscriptions,
  reachable: nativeAppDevices + browserSubscriptions > 0,
});

/** What the account service's device counts (CountDevices) and the audience service's subscription counts (CountSubscriptions) add up to. */
export function channelCounts(
  devices: { externalIdDevices: string; siteDevices: string },
  subscriptions: { externalIdActive: string; siteVerified: string; siteActive: string },
): ChannelCounts {
  return {
    user: channels(Number(devices.externalIdDevices), Number(subscriptions.externalIdActive)),
    team: channels(Number(devices.siteDevices), Number(subscriptions.siteVerified)),
    site: channels(Number(devices.siteDevices), Number(subscriptions.siteActive)),
  };
}
