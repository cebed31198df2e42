-- Workspaces, their site, API keys, machines and paired native-app devices.

CREATE TABLE workspaces (
  id                text PRIMARY KEY,
  name              text NOT NULL,
  -- 'none' is a workspace without an active plan.
  plan              text NOT NULL CHECK (plan IN ('none', 'free', 'starter', 'growth', 'enterprise', 'partner')),
  approval_mode     text NOT NULL DEFAULT 'browser' CHECK (approval_mode IN ('browser', 'terminal')),
  owner_external_id text NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now()
);

-- One site per workspace: the origin its browser subscribers come from.
CREATE TABLE sites (
  id                text PRIMARY KEY,
  workspace_id      text NOT NULL UNIQUE REFERENCES workspaces (id) ON DELETE CASCADE,
  name              text NOT NULL,
  slug              text NOT NULL UNIQUE,
  domain            text NOT NULL,
  -- Public site key (pk_<id>), used by the browser SDK.
  site_key          text NOT NULL UNIQUE,
  -- VAPID (RFC 8292) P-256 key pair, base64url: the uncompressed public point and the private scalar.
  vapid_public_key  text NOT NULL,
  vapid_private_key text NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  -- The <id> of pk_<id>.<secret>.
  id                text PRIMARY KEY,
  workspace_id      text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  name              text NOT NULL,
  origin            text NOT NULL CHECK (origin IN ('dashboard', 'runtime', 'connector', 'bound')),
  scopes            text[] NOT NULL,
  bound_external_id text,
  -- SHA-256 of the secret. Secrets are 256 random bits, so a fast hash is enough; never stored plain.
  secret_hash       bytea NOT NULL CHECK (octet_length(secret_hash) = 32),
  created_at        timestamptz NOT NULL DEFAULT now(),
  last_used_at      timestamptz,
  expires_at        timestamptz,
  revoked_at        timestamptz,
  CHECK ((origin = 'bound') = (bound_external_id IS NOT NULL))
);
CREATE INDEX api_keys_workspace_created ON api_keys (workspace_id, created_at DESC);

-- Machines that runtime keys report from (X-Herald-Machine-Id header).
CREATE TABLE machines (
  workspace_id  text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  machine_id    text NOT NULL,
  name          text NOT NULL DEFAULT '',
  platform      text NOT NULL DEFAULT '',
  key_id        text NOT NULL,
  first_seen_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, machine_id)
);
CREATE INDEX machines_workspace_seen ON machines (workspace_id, last_seen_at DESC);

-- Native-app devices paired to a workspace (phone pairing); counted by GET /channels.
CREATE TABLE devices (
  id           text PRIMARY KEY,
  workspace_id text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  external_id  text NOT NULL,
  platform     text NOT NULL,
  paired_at    timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz
);
CREATE INDEX devices_workspace_live ON devices (workspace_id, external_id) WHERE revoked_at IS NULL;
