/**
 * Test-only application server: an RFC 8291 encryptor and an RFC 8292 VAPID signer, written from
 * the RFC text with node:crypto and deliberately sharing nothing with the peer (it uses hkdfSync
 * where the peer spells out HMAC steps). Knobs let tests build each malformed variant.
 */
import { createECDH, createCipheriv, generateKeyPairSync, hkdfSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import http2, { type ClientHttp2Session, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';

export const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64url');
export const unb64 = (text: string): Buffer => Buffer.from(text, 'base64url');

export interface VapidKeys {
  /** base64url 65-octet uncompressed point: the `k` parameter and the applicationServerKey. */
  readonly publicKey: string;
  readonly privateKey: KeyObject;
}

export function makeVapidKeys(): VapidKeys {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicKey.export({ format: 'jwk' });
  const point = Buffer.concat([Buffer.from([0x04]), unb64(jwk.x!), unb64(jwk.y!)]);
  return { publicKey: b64(point), privateKey };
}

export function signJwt(privateKey: KeyObject, claims: Record<string, unknown>, header: Record<string, unknown> = { typ: 'JWT', alg: 'ES256' }, dsaEncoding: 'ieee-p1363' | 'der' = 'ieee-p1363'): string {
  const input = `${b64(Buffer.from(JSON.stringify(header)))}.${b64(Buffer.from(JSON.stringify(claims)))}`;
  const signature = sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding });
  return `${input}.${b64(signature)}`;
}

export function claimsFor(audience: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { aud: audience, exp: Math.floor(Date.now() / 1000) + 12 * 3600, sub: 'mailto:push-tests@herald.example', ...overrides };
}

export function vapidAuthorization(keys: VapidKeys, audience: string, overrides: Record<string, unknown> = {}): string {
  return `vapid t=${signJwt(keys.privateKey, claimsFor(audience, overrides))}, k=${keys.publicKey}`;
}

export interface EncryptOptions {
  readonly salt?: Buffer;
  /** The sender's ephemeral private key (32 octets); fresh by default. */
  readonly senderPrivateKey?: Buffer;
  readonly rs?: number;
  /** Zero octets of padding after the delimiter. */
  readonly padding?: number;
  readonly delimiter?: number;
  /** Override the idlen octet / keyid (for malformed variants). */
  readonly keyid?: Buffer;
}

/** RFC 8291 section 3.4 + RFC 8188, one record. */
export function encrypt(plaintext: Uint8Array, keys: { readonly p256dh: string; readonly auth: string }, options: EncryptOptions = {}): Buffer {
  const uaPublic = unb64(keys.p256dh);
  const authSecret = unb64(keys.auth);
  const sender = createECDH('prime256v1');
  if (options.senderPrivateKey) sender.setPrivateKey(options.senderPrivateKey);
  else sender.generateKeys();
  const asPublic = sender.getPublicKey();
  const ecdhSecret = sender.computeSecret(uaPublic);
  const salt = options.salt ?? randomBytes(16);
  const ikm = Buffer.from(hkdfSync('sha256', ecdhSecret, authSecret, Buffer.concat([Buffer.from('WebPush: info\0'), uaPublic, asPublic]), 32));
  const cek = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: aes128gcm\0'), 16));
  const nonce = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: nonce\0'), 12));
  const cipher = createCipheriv('aes-128-gcm', cek, nonce);
  const record = Buffer.concat([plaintext, Buffer.from([options.delimiter ?? 0x02]), Buffer.alloc(options.padding ?? 0)]);
  const ciphertext = Buffer.concat([cipher.update(record), cipher.final(), cipher.getAuthTag()]);
  const keyid = options.keyid ?? asPublic;
  const header = Buffer.alloc(21);
  salt.copy(header, 0);
  header.writeUInt32BE(options.rs ?? 4096, 16);
  header[20] = keyid.length;
  return Buffer.concat([header, keyid, ciphertext]);
}

export interface Reply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
  /** The `error` code of a JSON error body. */
  readonly error: string | undefined;
}

export type Outcome = Reply | { readonly status: 'reset'; readonly code: string };

/** Narrows an outcome to an HTTP answer (fails the test on a stream reset). */
export function reply(outcome: Outcome): Reply {
  if (outcome.status === 'reset') throw new Error(`expected an HTTP answer, got a stream reset (${outcome.code})`);
  return outcome;
}

/** A minimal HTTP/2 client (one session) for driving the peer. */
export class H2 {
  private readonly session: ClientHttp2Session;

  constructor(origin: string, ca?: string) {
    this.session = http2.connect(origin, ca === undefined ? {} : { ca });
    this.session.on('error', () => {});
  }

  request(method: string, path: string, headers: OutgoingHttpHeaders = {}, body?: Uint8Array | string): Promise<Outcome> {
    return new Promise((resolve, reject) => {
      const stream = this.session.request({ ':method': method, ':path': path, ...headers }, { endStream: body === undefined });
      let responseHeaders: IncomingHttpHeaders | undefined;
      const chunks: Buffer[] = [];
      stream.on('response', (h) => (responseHeaders = h));
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        if (!responseHeaders) return;
        const text = Buffer.concat(chunks).toString('utf8');
        let error: string | undefined;
        try {
          const parsed = JSON.parse(text) as { error?: unknown };
          if (typeof parsed.error === 'string') error = parsed.error;
        } catch {
          // not JSON
        }
        resolve({ status: Number(responseHeaders[':status']), headers: responseHeaders, text, error });
      });
      stream.on('error', (err: Error & { code?: string }) => {
        if (err.code === 'ERR_HTTP2_STREAM_ERROR') resolve({ status: 'reset', code: err.message });
        else reject(err);
      });
      if (body !== undefined) stream.end(body);
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.session.close(() => resolve()));
  }

  /** The connection dropped at once, as when the sending process is killed. */
  destroy(): void {
    this.session.destroy();
  }
}

/** Splits an origin-qualified endpoint into the path the client sends. */
export const pathOf = (endpoint: string): string => new URL(endpoint).pathname;
