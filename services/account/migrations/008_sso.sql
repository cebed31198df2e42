-- OpenID Connect single sign-on, at most one provider per workspace. The client secret is kept in
-- the clear like the workspace's other secrets (webhook signing, identity verification): the token
-- request needs the secret itself. No response and no log line carries it.
CREATE TABLE sso_configs (
  workspace_id        text PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
  issuer              text NOT NULL,
  client_id           text NOT NULL,
  client_secret       text NOT NULL,
  -- Lower case; empty: any domain (for addresses that are members already).
  allowed_domains     text[] NOT NULL DEFAULT '{}',
  -- The role an unknown address of an allowed domain becomes a member with; null: not provisioned.
  auto_provision_role text CHECK (auto_provision_role IN ('admin', 'marketer', 'approver', 'viewer')),
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  CHECK (auto_provision_role IS NULL OR cardinality(allowed_domains) > 0)
);

-- Sign-in attempts: one per press of "sign in with SSO", completed at most once and only within a
-- few minutes. Only SHA-256 of the state (256 random bits; the browser's pre-sign-in cookie holds
-- it) is stored; the nonce and the PKCE verifier are needed in the clear to check the answer.
CREATE TABLE sso_attempts (
  state_hash    bytea PRIMARY KEY CHECK (octet_length(state_hash) = 32),
  workspace_id  text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  nonce         text NOT NULL,
  code_verifier text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL,
  used_at       timestamptz
);
CREATE INDEX sso_attempts_expires ON sso_attempts (expires_at);
