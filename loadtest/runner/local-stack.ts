import { startSendingHarness, type SendingHarness } from '@herald/testkit';

/**
 * A Herald every journey can load, on this machine: all services and one gateway on free ports
 * (testkit's stack) and a local push peer in count mode whose key-pool endpoints all exist, so
 * the subscribers the journeys create receive their pushes (PUSH_PEER_URL = peer.origin).
 */
export function startLoadStack(): Promise<SendingHarness> {
  return startSendingHarness({ policy: true, decisions: true }, { mode: 'count', keyPool: 64, poolEndpoints: Number.POSITIVE_INFINITY });
}
