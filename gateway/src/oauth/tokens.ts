import { constants, createHash, verify, type KeyObject } from 'node:crypto';

import { isKeyId } from '@herald/domain';
import { HeraldError } from '@herald/errors';
import type { Principal } from '@herald/proto/herald/account/v1/account';
import type { FastifyReply } from 'fastify';

import { VerifiedCache } from '../cache.js';
import type { ServiceClients } from '../clients.js';
import type { Jwks } from './jwks.js';

/**
 * OAuth 2.0 access tokens (RFC 9068 JWTs) as an alternative to API keys. A token names a Herald
 * key (`herald_key_id`, else `sub`); the caller is that key's principal, its scopes narrowed to
 * the token's `scope`. A token can never do more than the key it names.
 */

/** The RFC 9728 metadata URL, named in every Bearer challenge. */
export const resourceMetadataUrl = (publicOrigin: string): string => `${publicOrigin}/.well-known/oauth-protected-resource`;

/** RFC 6750 §3 challenge pointing MCP clients at the protected resource metadata (RFC 9728 §5.1). */
export function bearerChallenge(resourceMetadata: string, error?: 'invalid_token' | 'insufficient_scope', scope?: string): string {
  return `Bearer resource_metadata="${resourceMetadata}"${error ? `, error="${error}"` : ''}${scope ? `, scope="${scope}"` : ''}`;
}

const MAX_TOKEN_LENGTH = 8_192;
const jwtShape = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** A Bearer value that is a JWT rather than a Herald key. */
export const isJwtShaped = (bearer: string): boolean => bearer.length <= MAX_TOKEN_LENGTH && jwtShape.test(bearer);

interface Algorithm {
  hash: string | null;
  keyType: string;
  curve?: string;
  pss?: true;
}

/** Asymmetric algorithms only: `none` and HMAC (a shared secret Herald does not have) are refused. */
const ALGORITHMS: Record<string, Algorithm> = {
  RS256: { hash: 'sha256', keyType: 'rsa' },
  RS384: { hash: 'sha384', keyType: 'rsa' },
  RS512: { hash: 'sha512', keyType: 'rsa' },
  PS256: { hash: 'sha256', keyType: 'rsa', pss: true },
  PS384: { hash: 'sha384', keyType: 'rsa', pss: true },
  PS512: { hash: 'sha512', keyType: 'rsa', pss: true },
  ES256: { hash: 'sha256', keyType: 'ec', curve: 'prime256v1' },
  ES384: { hash: 'sha384', keyType: 'ec', curve: 'secp384r1' },
  ES512: { hash: 'sha512', keyType: 'ec', curve: 'secp521r1' },
  EdDSA: { hash: null, keyType: 'ed25519' },
};

/** RFC 9068 says at+jwt; many authorization servers still send JWT, which is accepted too. */
const ACCEPTED_TYPES = new Set(['at+jwt', 'application/at+jwt', 'jwt']);

export interface AccessTokenOptions {
  issuer: string;
  /** The `resource` the metadata advertises; `aud` must contain it. */
  resource: string;
  clockSkewSeconds: number;
  resourceMetadata: string;
  cacheTtlMs: number;
}

interface VerifiedToken {
  keyId: string;
  scopes: Set<string>;
  expiresAt: number;
}

function invalidToken(message: string): HeraldError {
  return new HeraldError('unauthorized', message, {
    title: 'Invalid access token',
    hint: 'Get a new access token from the authorization server, or use an API key.',
  });
}

function decodeSegment(segment: string, what: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // Reported below as one malformed-token error.
  }
  throw invalidToken(`The access token's ${what} is not a JSON object.`);
}

function signatureMatches(algorithm: Algorithm, key: KeyObject, signingInput: string, signature: Buffer): boolean {
  const keyType = key.asymmetricKeyType === 'rsa-pss' ? 'rsa' : key.asymmetricKeyType;
  if (keyType !== algorithm.keyType || (algorithm.curve && key.asymmetricKeyDetails?.namedCurve !== algorithm.curve)) return false;
  const options = algorithm.pss
    ? { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST }
    : { key, dsaEncoding: 'ieee-p1363' as const };
  try {
    return verify(algorithm.hash, Buffer.from(signingInput), options, signature);
  } catch {
    return false;
  }
}

const isNumber = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);

export class AccessTokens {
  private readonly cache: VerifiedCache<Principal>;

  constructor(
    private readonly jwks: Jwks,
    private readonly account: ServiceClients['account'],
    private readonly options: AccessTokenOptions,
  ) {
    this.cache = new VerifiedCache(options.cacheTtlMs);
  }

  /**
   * The principal a token acts as. Refusals are 401 with the invalid_token challenge; verified
   * tokens are remembered like keys (KEY_CACHE_TTL_MS), never past their exp or the key's expiry.
   */
  async authenticate(token: string, reply: FastifyReply): Promise<Principal> {
    const cacheKey = createHash('sha256').update(token).digest('base64');
    try {
      return await this.cache.get(cacheKey, async () => {
        const verified = await this.verify(token);
        const principal = await this.keyPrincipal(verified.keyId);
        const keyExpiry = principal.keyExpiresAt ? Date.parse(principal.keyExpiresAt) : Number.POSITIVE_INFINITY;
        return {
          value: { ...principal, scopes: principal.scopes.filter((scope) => verified.scopes.has(scope)) },
          validUntil: Math.min(verified.expiresAt, keyExpiry),
        };
      });
    } catch (err) {
      if (err instanceof HeraldError && err.code === 'unauthorized') void reply.header('www-authenticate', bearerChallenge(this.options.resourceMetadata, 'invalid_token'));
      throw err;
    }
  }

  private async keyPrincipal(keyId: string): Promise<Principal> {
    try {
      const { principal } = await this.account.authenticateKeyId({ keyId });
      if (!principal) throw new Error('account service returned no principal');
      return principal;
    } catch (err) {
      if (err instanceof HeraldError && err.code === 'unauthorized') throw invalidToken('The access token names an API key that is unknown, revoked or expired.');
      throw err;
    }
  }

  private async verify(token: string): Promise<VerifiedToken> {
    const [headerSegment = '', payloadSegment = '', signatureSegment = ''] = token.split('.');
    const header = decodeSegment(headerSegment, 'header');
    const algorithm = typeof header.alg === 'string' ? ALGORITHMS[header.alg] : undefined;
    if (!algorithm) throw invalidToken(`The access token's alg "${String(header.alg)}" is not accepted; it must be an asymmetric signature such as RS256 or ES256.`);
    if (typeof header.typ !== 'string' || !ACCEPTED_TYPES.has(header.typ.toLowerCase())) throw invalidToken('The access token\'s typ must be "at+jwt" (RFC 9068) or "JWT".');
    if (header.crit !== undefined) throw invalidToken('The access token has critical header parameters Herald does not understand.');
    if (typeof header.kid !== 'string') throw invalidToken('The access token\'s header names no kid.');

    const signingKey = await this.jwks.find(header.kid);
    if (!signingKey) throw invalidToken(`The authorization server has no signing key "${header.kid}".`);
    if (signingKey.alg !== undefined && signingKey.alg !== header.alg) throw invalidToken(`Signing key "${header.kid}" is not for ${String(header.alg)}.`);
    if (!signatureMatches(algorithm, signingKey.key, `${headerSegment}.${payloadSegment}`, Buffer.from(signatureSegment, 'base64url'))) {
      throw invalidToken('The access token\'s signature is not valid.');
    }

    const claims = decodeSegment(payloadSegment, 'payload');
    const { issuer, resource, clockSkewSeconds } = this.options;
    if (claims.iss !== issuer) throw invalidToken(`The access token was not issued by ${issuer}.`);
    const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
    if (!audiences.includes(resource)) throw invalidToken(`The access token's audience does not include ${resource}.`);
    const now = Date.now() / 1_000;
    if (!isNumber(claims.exp)) throw invalidToken('The access token has no exp.');
    if (claims.exp + clockSkewSeconds <= now) throw invalidToken('The access token has expired.');
    if (claims.nbf !== undefined && (!isNumber(claims.nbf) || claims.nbf - clockSkewSeconds > now)) throw invalidToken('The access token is not valid yet (nbf).');
    if (!isNumber(claims.iat) || claims.iat - clockSkewSeconds > now) throw invalidToken('The access token\'s iat is missing or in the future.');
    if (typeof claims.scope !== 'string') throw invalidToken('The access token has no scope claim.');
    const keyId = typeof claims.herald_key_id === 'string' ? claims.herald_key_id : claims.sub;
    if (typeof keyId !== 'string' || !isKeyId(keyId)) throw invalidToken('The access token names no Herald key id (herald_key_id or sub).');
    return { keyId, scopes: new Set(claims.scope.split(' ')), expiresAt: claims.exp * 1_000 };
  }
}
