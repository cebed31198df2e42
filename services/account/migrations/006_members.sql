-- Workspace members: the people who sign in (the console), each with one role per workspace.
CREATE TABLE members (
  id              text PRIMARY KEY,
  workspace_id    text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  -- Normalised by the service: trimmed, lower case.
  email           text NOT NULL CHECK (email = lower(btrim(email)) AND email <> ''),
  display_name    text NOT NULL DEFAULT '',
  role            text NOT NULL CHECK (role IN ('owner', 'admin', 'marketer', 'approver', 'viewer')),
  -- invited until the first sign-in; removed members keep their row (a record of who they were).
  status          text NOT NULL DEFAULT 'invited' CHECK (status IN ('invited', 'active', 'removed')),
  created_at      timestamptz NOT NULL DEFAULT now(),
  last_sign_in_at timestamptz,
  UNIQUE (workspace_id, email)
);
CREATE INDEX members_email ON members (email) WHERE status <> 'removed';

-- Single-use sign-in links ({PUBLIC_ORIGIN}/sign-in/<token>), mailed on request or by an invite,
-- or printed by the admin CLI. Only SHA-256 of the token (256 random bits) is stored.
CREATE TABLE sign_in_links (
  token_hash bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
  member_id  text NOT NULL REFERENCES members (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  used_at    timestamptz
);
CREATE INDEX sign_in_links_member ON sign_in_links (member_id);

-- Sessions (the herald_session cookie). Only SHA-256 of the session id (256 random bits) is
-- stored. A session ends at the first of: idle_expires_at (pushed forward as it is used),
-- expires_at (absolute), revoked_at.
CREATE TABLE member_sessions (
  id_hash         bytea PRIMARY KEY CHECK (octet_length(id_hash) = 32),
  member_id       text NOT NULL REFERENCES members (id) ON DELETE CASCADE,
  -- The session's CSRF token (X-CSRF-Token); not a credential on its own.
  csrf_token      text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  last_seen_at    timestamptz NOT NULL DEFAULT now(),
  idle_expires_at timestamptz NOT NULL,
  expires_at      timestamptz NOT NULL,
  revoked_at      timestamptz
);
CREATE INDEX member_sessions_member ON member_sessions (member_id) WHERE revoked_at IS NULL;

-- Dashboard keys may call every endpoint the plan includes: existing ones gain the scopes that came
-- with members (`members`; `me`, which only a session can use).
UPDATE api_keys SET scopes = scopes || ARRAY['members', 'me'] WHERE origin = 'dashboard' AND NOT scopes @> ARRAY['members'];
