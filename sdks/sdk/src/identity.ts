import { createHmac } from 'node:crypto';

/**
 * Identity verification, on your server: the proof that makes a browser subscriber's externalId
 * verified (an approver device, the only kind that receives questions). Compute it where the user
 * is signed in, with the workspace's identity-verification secret (`getIdentitySecret()`, never
 * sent to a browser), and hand it to the browser SDK: `herald.setExternalId(id, { proof })`.
 *
 * The proof is HMAC-SHA256 of the externalId (UTF-8) keyed with the whole secret string, as
 * lowercase hex.
 */
export function externalIdProof(secret: string, externalId: string): string {
  return createHmac('sha256', secret).update(externalId, 'utf8').digest('hex');
}
