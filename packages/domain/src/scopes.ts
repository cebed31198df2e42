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
  'webhooks', // workspace settings: the webhook signing secret, the identity-verification secret, the Slack connection, the approval mode (PATCH /workspace)
  'members', // /members: the workspace's people and their roles
  'me', // /me: a signed-in member's own profile, sessions, passkeys and devices (sessions only)
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

/** A workspace member's role (a person signed in with a session, not a key). */
export const ROLES = ['owner', 'admin', 'marketer', 'approver', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}

/**
 * What each role may do: the scopes it may read (GET, HEAD) and the scopes it may change (every
 * other method). The gateway checks a session against this table where it checks a key's scopes
 * (gateway/src/access.ts). Beyond it, one rule: only an owner makes or removes an owner.
 */
const READ_ALL = SCOPES.filter((scope) => scope !== 'webhooks' && scope !== 'members' && scope !== 'keys');
/** Every member may read their profile and end their own sessions. */
const SELF: readonly Scope[] = ['me'];
const roleTable: Record<Role, { read: readonly Scope[]; change: readonly Scope[] }> = {
  owner: { read: SCOPES, change: SCOPES },
  // Everything but ownership (the rule above).
  admin: { read: SCOPES, change: SCOPES },
  // Content and audience: campaigns, templates, segments (the subscribers scope), flows, send.
  marketer: {
    read: READ_ALL,
    change: [...SELF, 'notifications:send', 'subscribers', 'campaigns', 'templates', 'flows'],
  },
  // Answers questions and decisions; reads the rest.
  approver: { read: READ_ALL, change: [...SELF, 'ask', 'decisions'] },
  // Reads, changes nothing.
  viewer: { read: READ_ALL, change: SELF },
};

/** Whether `role` may call a route of `scope` with `method`. */
export function roleAllows(role: Role, scope: Scope, method: string): boolean {
  const reads = method === 'GET' || method === 'HEAD';
  const { read, change } = roleTable[role];
  return (reads ? read : change).includes(scope);
}

