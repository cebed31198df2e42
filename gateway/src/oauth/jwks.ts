import { createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';

import { HeraldError } from '@herald/errors';
import type { Logger } from '@herald/logging';

/**
 * The authorization server's signing keys (JWKS), found from its metadata (RFC 8414, then OpenID
 * discovery) or a configured URL, kept for the response's Cache-Control max-age (or a fixed TTL),
 * and refetched early only for an unknown kid, at most once per `minRefetchMs`.
 */

export interface JwksOptions {
  issuer: string;
  /** Empty: discovered from the issuer's metadata. */
  jwksUrl: string;
  allowLoopbackHttp: boolean;
  ttlMs: number;
  minRefetchMs: number;
  logger: Logger;
}

export interface SigningKey {
  key: KeyObject;
  /** The JWK's own `alg`, when it names one. */
  alg: string | undefined;
}

const FETCH_TIMEOUT_MS = 5_000;
const MAX_DOCUMENT_BYTES = 256 * 1024;
const MAX_TTL_MS = 86_400_000;
const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

function isLoopback(hostname: string): boolean {
  return LOOPBACK_NAMES.has(hostname) || (isIP(hostname) === 4 && hostname.startsWith('127.'));
}

/** https only, unless the operator allowed http for a loopback authorization server (tests). */
function assertFetchable(url: string, allowLoopbackHttp: boolean): URL {
  const parsed = new URL(url);
  if (parsed.protocol === 'https:') return parsed;
  if (parsed.protocol === 'http:' && allowLoopbackHttp && isLoopback(parsed.hostname)) return parsed;
  throw new Error(`refusing to fetch ${url}: the authorization server must use https (http only on loopback with OAUTH_ALLOW_LOOPBACK_HTTP)`);
}

/** RFC 8414 §3: the well-known segment goes between the host and the issuer's path. */
function metadataUrls(issuer: string): string[] {
  const url = new URL(issuer);
  const path = url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '');
  return [`${url.origin}/.well-known/oauth-authorization-server${path}`, `${url.origin}${path}/.well-known/openid-configuration`];
}

function maxAgeMs(cacheControl: string | null): number | undefined {
  const match = /(?:^|,)\s*max-age=(\d+)/i.exec(cacheControl ?? '');
  return match?.[1] === undefined ? undefined : Number(match[1]) * 1_000;
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

export class Jwks {
  private keys = new Map<string, SigningKey>();
  private fetchedAt = 0;
  private expiresAt = 0;
  private discoveredUrl: string | undefined;
  private refreshing: Promise<void> | undefined;

  constructor(private readonly options: JwksOptions) {
    assertFetchable(options.issuer, options.allowLoopbackHttp);
    if (options.jwksUrl) assertFetchable(options.jwksUrl, options.allowLoopbackHttp);
  }

  /** The key for `kid`; undefined when the AS does not have it (after at most one early refetch). */
  async find(kid: string): Promise<SigningKey | undefined> {
    if (Date.now() >= this.expiresAt) await this.refresh();
    const known = this.keys.get(kid);
    if (known || Date.now() - this.fetchedAt < this.options.minRefetchMs) return known;
    await this.refresh();
    return this.keys.get(kid);
  }

  /** Concurrent callers share one fetch. With keys already held, a failed fetch keeps them. */
  private async refresh(): Promise<void> {
    this.refreshing ??= this.load().finally(() => (this.refreshing = undefined));
    try {
      await this.refreshing;
    } catch (err) {
      this.options.logger.warn({ err }, 'OAuth signing keys could not be fetched');
      if (this.keys.size > 0) {
        // Keep verifying with the keys held; try again no sooner than an unknown kid would.
        this.fetchedAt = Date.now();
        this.expiresAt = this.fetchedAt + this.options.minRefetchMs;
      } else {
        throw new HeraldError('unavailable', 'The OAuth authorization server cannot be reached to verify the access token.', {
          title: 'Service unavailable',
          hint: 'Retry shortly, or use an API key.',
        });
      }
    }
  }

  private async load(): Promise<void> {
    const url = this.options.jwksUrl || (this.discoveredUrl ??= await this.discover());
    const { body, maxAge } = await this.fetchJson(url);
    if (!isRecord(body) || !Array.isArray(body.keys)) throw new Error(`${url} is not a JWK set`);
    const keys = new Map<string, SigningKey>();
    for (const jwk of body.keys) {
      if (!isRecord(jwk) || typeof jwk.kid !== 'string' || (jwk.use !== undefined && jwk.use !== 'sig')) continue;
      try {
        keys.set(jwk.kid, { key: createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' }), alg: typeof jwk.alg === 'string' ? jwk.alg : undefined });
      } catch {
        // A key type node:crypto does not know cannot verify anything; the others still can.
      }
    }
    const now = Date.now();
    this.keys = keys;
    this.fetchedAt = now;
    this.expiresAt = now + Math.min(Math.max(maxAge ?? this.options.ttlMs, this.options.minRefetchMs), MAX_TTL_MS);
  }

  /** The jwks_uri of the first metadata document found, whose issuer must be ours (RFC 8414 §3.3). */
  private async discover(): Promise<string> {
    const failures: string[] = [];
    for (const url of metadataUrls(this.options.issuer)) {
      try {
        const { body } = await this.fetchJson(url);
        if (!isRecord(body) || body.issuer !== this.options.issuer) throw new Error(`its issuer is not ${this.options.issuer}`);
        if (typeof body.jwks_uri !== 'string') throw new Error('it names no jwks_uri');
        assertFetchable(body.jwks_uri, this.options.allowLoopbackHttp);
        return body.jwks_uri;
      } catch (err) {
        failures.push(`${url}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    throw new Error(`no usable authorization server metadata (${failures.join('; ')})`);
  }

  private async fetchJson(url: string): Promise<{ body: unknown; maxAge: number | undefined }> {
    assertFetchable(url, this.options.allowLoopbackHttp);
    // Redirects are not followed: they could lead off https.
    const response = await fetch(url, { headers: { accept: 'application/json' }, redirect: 'error', signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    if (response.status !== 200) throw new Error(`status ${response.status}`);
    const text = await response.text();
    if (Buffer.byteLength(text) > MAX_DOCUMENT_BYTES) throw new Error(`larger than ${MAX_DOCUMENT_BYTES} bytes`);
    return { body: JSON.parse(text) as unknown, maxAge: maxAgeMs(response.headers.get('cache-control')) };
  }
}
