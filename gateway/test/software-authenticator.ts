import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';

/**
 * A WebAuthn authenticator in the test process (ES256, "none" attestation, user present and
 * verified), for the HTTP tests of what a browser cannot be made to send: a counter that goes
 * backwards, a challenge that was never issued, a credential Herald does not know. It answers
 * the JSON @simplewebauthn/browser would post (RegistrationResponseJSON, AuthenticationResponseJSON).
 */

const b64url = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64url');
const sha256 = (data: Uint8Array | string): Buffer => createHash('sha256').update(data).digest();

/** The few CBOR items the attestation object and a COSE key need (RFC 8949): ints, byte and text strings, maps. */
function cbor(value: number | string | Uint8Array | Map<number | string, unknown>): Buffer {
  const head = (major: number, length: number): Buffer => {
    if (length < 24) return Buffer.from([(major << 5) | length]);
    if (length < 256) return Buffer.from([(major << 5) | 24, length]);
    const bytes = Buffer.alloc(3);
    bytes[0] = (major << 5) | 25;
    bytes.writeUInt16BE(length, 1);
    return bytes;
  };
  if (typeof value === 'number') return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (typeof value === 'string') return Buffer.concat([head(3, Buffer.byteLength(value)), Buffer.from(value)]);
  if (value instanceof Uint8Array) return Buffer.concat([head(2, value.length), value]);
  const entries = [...value].flatMap(([key, item]) => [cbor(key), cbor(item as Parameters<typeof cbor>[0])]);
  return Buffer.concat([head(5, value.size), ...entries]);
}

const FLAG_USER_PRESENT = 0x01;
const FLAG_USER_VERIFIED = 0x04;
const FLAG_ATTESTED_DATA = 0x40;

export interface RegistrationOptions {
  challenge: string;
  rp: { id: string; name: string };
  user: { id: string; name: string; displayName: string };
}

export class SoftwareAuthenticator {
  readonly credentialId = randomBytes(16);
  private readonly privateKey: KeyObject;
  private readonly publicKey: KeyObject;
  /** The user handle the credential was made for (registration options' user.id). */
  userHandle: string | undefined;

  constructor(
    readonly origin: string,
    readonly rpId: string,
  ) {
    ({ privateKey: this.privateKey, publicKey: this.publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' }));
  }

  get id(): string {
    return b64url(this.credentialId);
  }

  private clientData(type: 'webauthn.create' | 'webauthn.get', challenge: string, origin = this.origin): string {
    return b64url(Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false })));
  }

  private authenticatorData(counter: number, attested?: Buffer): Buffer {
    const counterBytes = Buffer.alloc(4);
    counterBytes.writeUInt32BE(counter);
    const flags = FLAG_USER_PRESENT | FLAG_USER_VERIFIED | (attested ? FLAG_ATTESTED_DATA : 0);
    return Buffer.concat([sha256(this.rpId), Buffer.from([flags]), counterBytes, ...(attested ? [attested] : [])]);
  }

  /** navigator.credentials.create's answer to `options`, by default for the challenge it carries. */
  register(options: RegistrationOptions, { challenge = options.challenge, counter = 0 }: { challenge?: string; counter?: number } = {}) {
    this.userHandle = options.user.id;
    const jwk = this.publicKey.export({ format: 'jwk' });
    const coseKey = cbor(
      new Map<number, unknown>([
        [1, 2], // kty: EC2
        [3, -7], // alg: ES256
        [-1, 1], // crv: P-256
        [-2, Buffer.from(jwk.x ?? '', 'base64url')],
        [-3, Buffer.from(jwk.y ?? '', 'base64url')],
      ]),
    );
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(this.credentialId.length);
    const attested = Buffer.concat([Buffer.alloc(16), idLength, this.credentialId, coseKey]);
    const attestationObject = cbor(new Map<string, unknown>([['fmt', 'none'], ['attStmt', new Map()], ['authData', this.authenticatorData(counter, attested)]]));
    return {
      id: this.id,
      rawId: this.id,
      type: 'public-key' as const,
      clientExtensionResults: {},
      response: { clientDataJSON: this.clientData('webauthn.create', challenge), attestationObject: b64url(attestationObject), transports: ['internal'] },
    };
  }

  /** navigator.credentials.get's answer to a challenge, signed with this counter (on a page of `origin`). */
  assert(challenge: string, counter: number, origin = this.origin) {
    const clientDataJSON = this.clientData('webauthn.get', challenge, origin);
    const authenticatorData = this.authenticatorData(counter);
    const signature = sign('sha256', Buffer.concat([authenticatorData, sha256(Buffer.from(clientDataJSON, 'base64url'))]), this.privateKey);
    return {
      id: this.id,
      rawId: this.id,
      type: 'public-key' as const,
      clientExtensionResults: {},
      response: {
        clientDataJSON,
        authenticatorData: b64url(authenticatorData),
        signature: b64url(signature),
        ...(this.userHandle ? { userHandle: this.userHandle } : {}),
      },
    };
  }
}
