// k6/encoding: base64 in k6's four alphabets (std, rawstd, url, rawurl).
import { notImplemented } from '../context.js';

type Alphabet = 'std' | 'rawstd' | 'url' | 'rawurl';

function bytes(input: string | ArrayBuffer): Buffer {
  return typeof input === 'string' ? Buffer.from(input, 'utf8') : Buffer.from(input);
}

export function b64encode(input: string | ArrayBuffer, encoding: Alphabet = 'std'): string {
  const base = bytes(input).toString(encoding === 'url' || encoding === 'rawurl' ? 'base64url' : 'base64').replace(/=+$/, '');
  if (encoding === 'rawstd' || encoding === 'rawurl') return base;
  if (encoding !== 'std' && encoding !== 'url') throw new Error(`b64encode: unknown encoding "${String(encoding)}"`);
  return base + '='.repeat((4 - (base.length % 4)) % 4);
}

export function b64decode(input: string, encoding: Alphabet = 'std', format?: 's'): string | ArrayBuffer {
  if (!['std', 'rawstd', 'url', 'rawurl'].includes(encoding)) throw new Error(`b64decode: unknown encoding "${String(encoding)}"`);
  const decoded = Buffer.from(input, encoding === 'url' || encoding === 'rawurl' ? 'base64url' : 'base64');
  if (format === 's') return decoded.toString('utf8');
  if (format !== undefined) throw notImplemented(`b64decode format "${String(format)}"`);
  return decoded.buffer.slice(decoded.byteOffset, decoded.byteOffset + decoded.byteLength) as ArrayBuffer;
}

export default { b64encode, b64decode };
