-- Single-use enrollment links (POST /enroll): {PUBLIC_ORIGIN}/enroll/<token>.
CREATE TABLE enrollments (
  -- SHA-256 of the link's token (256 random bits); the token itself is never stored.
  token_hash   bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
  workspace_id text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  site_id      text NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
  external_id  text NOT NULL,
  -- The key that asked for the link.
  key_id       text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  used_at      timestamptz
);

