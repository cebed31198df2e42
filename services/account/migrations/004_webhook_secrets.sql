-- Webhook signing secrets (Standard Webhooks, "whsec_<base64>"): one current secret per
-- workspace, and after a rotation the previous one until its expires_at (the grace period in
-- which receivers switch). Kept in the clear: signing needs the secret itself.
CREATE TABLE webhook_secrets (
  id           bigserial PRIMARY KEY,
  workspace_id text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  secret       text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  -- null: the current secret; set when a rotation replaced it.
  expires_at   timestamptz
);
CREATE UNIQUE INDEX webhook_secrets_current ON webhook_secrets (workspace_id) WHERE expires_at IS NULL;
CREATE INDEX webhook_secrets_workspace ON webhook_secrets (workspace_id, id);
