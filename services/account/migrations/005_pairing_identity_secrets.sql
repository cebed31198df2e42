-- Pairing links (POST /pair, every plan) are enrollment links too: one table, one single-use
-- mechanism; `pairing` says which endpoint made the link (enrollment links need the Partner plan).
ALTER TABLE enrollments ADD COLUMN pairing boolean NOT NULL DEFAULT false;

-- Identity-verification secrets ("idsec_<base64url>"): a site's backend signs its users'
-- external ids with the current one (HMAC-SHA256), and the browser SDK passes the proof on
-- subscribe. Kept like webhook_secrets: one current secret per workspace and, after a rotation,
-- the previous one until its expires_at. In the clear: checking a proof needs the secret itself.
CREATE TABLE identity_secrets (
  id           bigserial PRIMARY KEY,
  workspace_id text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  secret       text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  -- null: the current secret; set when a rotation replaced it.
  expires_at   timestamptz
);
CREATE UNIQUE INDEX identity_secrets_current ON identity_secrets (workspace_id) WHERE expires_at IS NULL;
CREATE INDEX identity_secrets_workspace ON identity_secrets (workspace_id, id);
