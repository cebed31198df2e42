// k6/crypto: hashes and HMACs with k6's output encodings (hex, base64, base64url padded,
// base64rawurl), and randomBytes.
import { createHash as nodeHash, createHmac as nodeHmac, randomBytes as nodeRandomBytes } from 'node:crypto';

import { notImplemented } from '../context.js';

type Output = 'hex' | 'base64' | 'base64url' | 'base64rawurl' | 'binary';
const ALGORITHMS = new Set(['md4', 'md5', 'sha1', 'sha256', 'sha384', 'sha512', 'sha512_224', 'sha512_256', 'ripemd160']);

function encode(digest: Buffer, output: Output): string {
  switch (output) {
    case 'hex':
      return digest.toString('hex');
    case 'base64':
      return digest.toString('base64');
    case 'base64rawurl':
      return digest.toString('base64url');
    case 'base64url': {
      const raw = digest.toString('base64url');
      return raw + '='.repeat((4 - (raw.length % 4)) % 4);
    }
    case 'binary':
      throw notImplemented('k6/crypto output encoding "binary"');
    default:
      throw new Error(`k6/crypto: unknown output encoding "${String(output)}"`);
  }
}

function algorithm(name: string): string {
  if (!ALGORITHMS.has(name)) throw new Error(`k6/crypto: unknown algorithm "${name}"`);
  if (name === 'sha512_224' || name === 'sha512_256') return name.replace('_', '-');
  return name;
}

const input = (data: string | ArrayBuffer): Buffer => (typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data));

export function hmac(name: string, secret: string | ArrayBuffer, data: string | ArrayBuffer, output: Output): string {
  return encode(nodeHmac(algorithm(name), input(secret)).update(input(data)).digest(), output);
}

export function hash(name: string, data: string | ArrayBuffer, output: Output): string {
  return encode(nodeHash(algorithm(name)).update(input(data)).digest(), output);
}

export const md5 = (data: string | ArrayBuffer, output: Output): string => hash('md5', data, output);
export const sha1 = (data: string | ArrayBuffer, output: Output): string => hash('sha1', data, output);
export const sha256 = (data: string | ArrayBuffer, output: Output): string => hash('sha256', data, output);
export const sha384 = (data: string | ArrayBuffer, output: Output): string => hash('sha384', data, output);
export const sha512 = (data: string | ArrayBuffer, output: Output): string => hash('sha512', data, output);

export function randomBytes(size: number): ArrayBuffer {
  const bytes = nodeRandomBytes(size);
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}

export function createHash(): never {
  throw notImplemented('k6/crypto.createHash');
}

export function createHMAC(): never {
  throw notImplemented('k6/crypto.createHMAC');
}

export default { hmac, md5, sha1, sha256, sha384, sha512, randomBytes, createHash, createHMAC };
