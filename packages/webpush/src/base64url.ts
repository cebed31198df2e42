/** base64url without padding (RFC 4648 section 5), as Web Push and JOSE use it. */
export function toBase64Url(bytes: Buffer): string {
  return bytes.toString('base64url');
}

/** Decodes base64url (padding and the standard alphabet are tolerated, as browsers' keys vary). */
export function fromBase64Url(value: string | Buffer): Buffer {
  return typeof value === 'string' ? Buffer.from(value, 'base64url') : value;
}
