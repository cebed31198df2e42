export { startPushPeer } from './peer.js';
export type * from './types.js';
export {
  generateKeyPool,
  generateKeyPoolEntry,
  readKeyPoolFile,
  subscriptionFromPool,
  validateKeyPool,
  writeKeyPoolFile,
  type KeyPoolEntry,
  type PushSubscriptionJSON,
} from './keypool.js';
export {
  base64url,
  decodeBase64url,
  decryptPushMessage,
  deriveKeys,
  parseAes128gcm,
  parseVapidAuthorization,
  PushPeerError,
  receiverKeys,
  verifyVapid,
  type Aes128gcmHeader,
  type Decrypted,
  type ReceiverKeys,
  type VapidClaims,
  type VapidCredentials,
} from './crypto.js';
export { testTlsMaterial, type TlsMaterial } from './tls.js';
export type { BrowserChannel, BrowserMessage } from './websocket.js';
export type { HttpVersion } from './exchange.js';
