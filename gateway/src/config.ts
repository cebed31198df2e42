import { isIP } from 'node:net';

import { pieces, type Env } from '@herald/config';

/** proxy-addr's names for address ranges, accepted in TRUST_PROXY beside addresses and CIDRs. */
const NAMED_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * TRUST_PROXY: which proxies' X-Forwarded-For the client IP (`request.ip`: per-IP limits, logs) is
 * read through. A hop count (1 = the nearest proxy, whatever its address), or a comma-separated list
 * of proxy addresses and CIDRs (and loopback, linklocal, uniquelocal). Unset or 0: none, the
 * socket's peer is the client.
 */
export function parseTrustProxy(value: string): number | string[] | false {
  if (/^\d+$/.test(value)) {
    const hops = Number(value);
    if (hops > 10) throw new Error('must be a hop count from 0 to 10, or addresses and CIDRs');
    return hops === 0 ? false : hops;
  }
  const entries = value.split(',').map((entry) => entry.trim());
  for (const entry of entries) {
    const [address = '', prefix, extra] = entry.split('/');
    const family = isIP(address);
    const prefixValid = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 6 ? 128 : 32));
    if (NAMED_RANGES.has(entry)) continue;
    if (family === 0 || !prefixValid || extra !== undefined) throw new Error(`must be a hop count from 0 to 10, or addresses and CIDRs ("${entry}" is neither)`);
  }
  return entries;
}

/** MCP_ALLOWED_ORIGINS: comma-separated browser origins, each exactly scheme://host[:port]. */
export function parseOrigins(value: string): string[] {
  return value.split(',').map((entry) => {
    const origin = entry.trim();
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    if (!parsed || !['http:', 'https:'].includes(parsed.protocol) || parsed.origin !== origin) {
      throw new Error(`must be comma-separated origins such as https://app.example.com ("${origin}" is not one)`);
    }
    return origin;
  });
}

export function readConfig(env: Env) {
  return {
    ...pieces.redis(env),
    ...pieces.kafka(env),
    ...pieces.shutdown(env),
    host: env.string('HOST', '127.0.0.1'),
    /** Proxies in front of the gateway whose X-Forwarded-For names the client (see parseTrustProxy). */
    trustProxy: env.parsed('TRUST_PROXY', parseTrustProxy, false),
    port: env.port('PORT', 8080),
    /** Where clients reach Herald; used in links (documentation, pollUrl, upgradeUrl). */
    publicOrigin: env.url('PUBLIC_ORIGIN', ['http:', 'https:'], 'http://localhost:8080'),
    upgradeUrl: env.url('UPGRADE_URL', ['http:', 'https:'], 'https://herald.dev/pricing'),
    /** The OAuth authorization server MCP clients are pointed to (RFC 9728 metadata); empty: none is named, and Bearer JWTs are refused. */
    oauthAuthorizationServer: env.url('OAUTH_AUTHORIZATION_SERVER', ['http:', 'https:'], ''),
    /** Where the authorization server's signing keys are; empty: discovered from its metadata. */
    oauthJwksUrl: env.url('OAUTH_JWKS_URL', ['http:', 'https:'], ''),
    /** Allow http (loopback hosts only) for the authorization server: local tests, never production. */
    oauthAllowLoopbackHttp: env.boolean('OAUTH_ALLOW_LOOPBACK_HTTP', false),
    /** Tolerance on an access token's exp, nbf and iat. */
    oauthClockSkewSeconds: env.integer('OAUTH_CLOCK_SKEW_SECONDS', 60, { min: 0, max: 600 }),
    /** How long signing keys are kept when the JWKS response has no Cache-Control max-age. */
    oauthJwksTtlMs: env.integer('OAUTH_JWKS_TTL_MS', 600_000, { min: 1_000, max: 86_400_000 }),
    /** An unknown kid refetches the JWKS at most this often, so forged kids cannot flood the AS. */
    oauthJwksMinRefetchMs: env.integer('OAUTH_JWKS_MIN_REFETCH_MS', 30_000, { min: 0, max: 3_600_000 }),
    /** The most live question streams (GET /decisions/stream) one workspace holds open on one replica. */
    decisionStreamsPerWorkspace: env.integer('DECISION_STREAMS_PER_WORKSPACE', 20, { min: 1, max: 1_000 }),
    /** How often an idle question stream sends a comment line, so proxies and browsers keep it open. */
    decisionStreamHeartbeatMs: env.integer('DECISION_STREAM_HEARTBEAT_MS', 15_000, { min: 100, max: 300_000 }),
    accountGrpcUrl: env.string('ACCOUNT_GRPC_URL', '127.0.0.1:50051'),
    audienceGrpcUrl: env.string('AUDIENCE_GRPC_URL', '127.0.0.1:50052'),
    campaignGrpcUrl: env.string('CAMPAIGN_GRPC_URL', '127.0.0.1:50053'),
    deliveryGrpcUrl: env.string('DELIVERY_GRPC_URL', '127.0.0.1:50054'),
    policyGrpcUrl: env.string('POLICY_GRPC_URL', '127.0.0.1:50055'),
    decisionGrpcUrl: env.string('DECISION_GRPC_URL', '127.0.0.1:50056'),
    flowGrpcUrl: env.string('FLOW_GRPC_URL', '127.0.0.1:50057'),
    grpcDeadlineMs: env.integer('GRPC_DEADLINE_MS', 5_000, { min: 100, max: 60_000 }),
    /** How long a verified key is trusted before it is checked again (bounds revocation delay). */
    keyCacheTtlMs: env.integer('KEY_CACHE_TTL_MS', 5_000, { min: 0, max: 60_000 }),
    /**
     * While Redis is unreachable each replica enforces limit / this number on its own, so the
     * fleet as a whole stays within the plan's limit. Set it to the replica count.
     */
    /** The rate-limit window; the plans' limits are per minute, so only tests shorten it. */
    rateLimitWindowMs: env.integer('RATE_LIMIT_WINDOW_MS', 60_000, { min: 1_000, max: 3_600_000 }),
    rateLimitFallbackReplicas: env.integer('RATE_LIMIT_FALLBACK_REPLICAS', 2, { min: 1, max: 1_000 }),
    /**
     * Browser SDK endpoints. Sites registered on localhost (localhost, *.localhost, 127.x.x.x,
     * with or without a port; http allowed) work only while this is true: production sets false.
     */
    allowLocalhostSites: env.boolean('ALLOW_LOCALHOST_SITES', true),
    /** Host suffixes a push subscription's endpoint must be on (a browser's push service). */
    pushServiceHosts: env.list('PUSH_SERVICE_HOSTS', [
      'fcm.googleapis.com',
      'updates.push.services.mozilla.com',
      'push.services.mozilla.com',
      'web.push.apple.com',
      'notify.windows.com',
      'push.apple.com',
    ]),
    /** Accept endpoints on any https host (tests, local push services); never in production. */
    allowAnyPushService: env.boolean('ALLOW_ANY_PUSH_SERVICE', false),
    /** Checks the engagement tokens the delivery fleet signs into pushes; the same secret as the fleet's. */
    engagementTokenSecret: env.string('ENGAGEMENT_TOKEN_SECRET'),
    /** Engagement reports (POST /api/v1/events) a site may send per minute: a campaign's impressions arrive at once. */
    engagementSiteRateLimitPerMinute: env.integer('ENGAGEMENT_SITE_RATE_LIMIT_PER_MINUTE', 1_000_000, { min: 1, max: 100_000_000 }),
    /** ...and one client IP (a browser reports a few per push). */
    engagementIpRateLimitPerMinute: env.integer('ENGAGEMENT_IP_RATE_LIMIT_PER_MINUTE', 600, { min: 1, max: 1_000_000 }),
    /** How long an engagement report waits for Kafka's acknowledgement before it is answered 503. */
    engagementPublishTimeoutMs: env.integer('ENGAGEMENT_PUBLISH_TIMEOUT_MS', 5_000, { min: 100, max: 60_000 }),
    /** GET /api/v1/site/{slug} needs no key: it is limited per client IP instead. */
    ipRateLimitPerMinute: env.integer('IP_RATE_LIMIT_PER_MINUTE', 100, { min: 1, max: 100_000 }),
    /** Sign-in link requests per address (each mails a link)... */
    signInAddressRateLimitPerMinute: env.integer('SIGN_IN_ADDRESS_RATE_LIMIT_PER_MINUTE', 3, { min: 1, max: 1_000 }),
    /** ...and sign-in requests (asking for links, using them) per client IP. */
    signInIpRateLimitPerMinute: env.integer('SIGN_IN_IP_RATE_LIMIT_PER_MINUTE', 20, { min: 1, max: 100_000 }),
    // Put in the rate-limit buckets' Redis keys: deployments sharing a Redis keep their own counts.
    ...pieces.namespace(env),
    /** Browser origins (besides PUBLIC_ORIGIN) whose pages may call MCP; other Origin headers are a 403. */
    mcpAllowedOrigins: env.parsed('MCP_ALLOWED_ORIGINS', parseOrigins, []),
    /** The largest MCP response (a batch's answers together); larger is a 400 asking for smaller batches. */
    mcpResponseLimitBytes: env.integer('MCP_RESPONSE_LIMIT_BYTES', 262_144, { min: 16_384, max: 16_777_216 }),
    bodyLimitBytes: env.integer('BODY_LIMIT_BYTES', 1_048_576, { min: 1_024, max: 16_777_216 }),
    requestTimeoutMs: env.integer('REQUEST_TIMEOUT_MS', 70_000, { min: 1_000, max: 600_000 }),
    /** A client must have sent its request line and headers within this (slow-loris clients are cut off). */
    headersTimeoutMs: env.integer('HEADERS_TIMEOUT_MS', 10_000, { min: 1_000, max: 60_000 }),
  };
}

export type GatewayConfig = ReturnType<typeof readConfig>;
