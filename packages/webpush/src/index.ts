export { fromBase64Url, toBase64Url } from './base64url.js';
export { classifyResponse, parseRetryAfter } from './classify.js';
export type { Classification, PushOutcome } from './classify.js';
export { PushClient } from './client.js';
export type { OriginStats, PushClientOptions, PushRequest, PushResponse, Urgency } from './client.js';
export {
  encrypt,
  encryptedSize,
  HEADER_BYTES,
  MAX_BODY_BYTES,
  MAX_PAYLOAD_BYTES,
  payloadFits,
  RECORD_SIZE,
  TAG_BYTES,
  validateSubscriptionKeys,
} from './encrypt.js';
export type { EncryptOptions, PushSubscriptionKeys } from './encrypt.js';
export { InvalidSubscriptionError, PayloadTooLargeError, PushNetworkError } from './errors.js';
export type { PushNetworkErrorCode } from './errors.js';
export { generateVapidKeys, originOf, VapidSigner } from './vapid.js';
export type { VapidKeys, VapidSignerOptions } from './vapid.js';
