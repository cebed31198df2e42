// Minimal typings for http_ece (no @types package), a CommonJS dev-dependency used only by the tests.

declare module 'http_ece' {
  import type { ECDH } from 'node:crypto';
  interface EceParams {
    version: 'aes128gcm' | 'aesgcm' | 'aesgcm128';
    privateKey?: ECDH;
    dh?: string | Buffer;
    authSecret?: string | Buffer;
    salt?: string | Buffer;
    rs?: number;
    keyid?: string | Buffer;
  }
  const ece: {
    encrypt(buffer: Buffer, params: EceParams): Buffer;
    decrypt(buffer: Buffer, params: EceParams): Buffer;
  };
  export default ece;
}
