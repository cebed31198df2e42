/**
 * What each key origin may call, as the spec's table says. A key's scopes are fixed from its
 * origin when it is created; each gateway route names the one scope it needs.
 */

export const SCOPES = [
  'identity', // GET /identity
  'account', // GET /site, /channels, /machines
  'notifications:send', // POST /send
  'notifications:read', // GET /notifications/{id}
  'ask', // /ask
  'decisions', // /decisions, /reachability
  'authorize', // POST /authorize
  'enroll', // POST /enroll
  'keys', // /keys (bound keys)
  'subscribers', // /subscribers
  'campaigns',
  'templates',
  'flows',
  'policy', // reading and replacing the workspace policy
  'webhooks', // the webhook signing secret and the identity-verification secret
] as const;
export type Scope = (typeof SCOPES)[number];

export const KEY_ORIGINS = ['dashboard', 'runtime', 'connector', 'bound'] as const;
export type KeyOrigin = (typeof KEY_ORIGINS)[number];

const scopesByOrigin: Record<KeyOrigin, readonly Scope[]> = {
  // Every endpoint the plan includes.
  dashboard: SCOPES,
  // CLI setup or login, phone pairing, desktop app: runtime calls only.
  runtime: ['identity', 'account', 'notifications:send', 'ask', 'decisions'],
  // Chat-assistant connector: send and identity only.
  connector: ['identity', 'notifications:send'],
  // Issued by POST /keys for one end-user: policy evaluation, that user's decisions and enrollment.
  bound: ['authorize', 'decisions', 'enroll'],
};

export function scopesForOrigin(origin: KeyOrigin): readonly Scope[] {
  return scopesByOrigin[origin];
}

export function isKeyOrigin(value: string): value is KeyOrigin {
  return (KEY_ORIGINS as readonly string[]).includes(value);
}
