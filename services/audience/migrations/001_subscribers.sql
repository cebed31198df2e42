-- Browser push subscriptions of a workspace's site.

CREATE TABLE subscribers (
  id           text PRIMARY KEY,
  workspace_id text NOT NULL,
  site_id      text NOT NULL,
  status       text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'unsubscribed', 'expired', 'bounced')),
  external_id  text,
  tags         text[] NOT NULL DEFAULT '{}',
  custom_data  jsonb NOT NULL DEFAULT '{}',
  -- The RFC 8030 push resource and the RFC 8291 keys (base64url).
  endpoint     text NOT NULL,
  p256dh       text NOT NULL,
  auth         text NOT NULL,
  browser      text,
  os           text,
  country      text,
  language     text,
  timezone     text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, endpoint)
);
CREATE INDEX subscribers_workspace_status ON subscribers (workspace_id, status);
CREATE INDEX subscribers_workspace_external_active ON subscribers (workspace_id, external_id) WHERE status = 'active';
