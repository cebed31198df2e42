-- Subscriber listing, sending targets and lifecycle timestamps.

-- When a subscriber stopped being active (unsubscribed, expired, bounced); NULL while active.
ALTER TABLE subscribers ADD COLUMN unsubscribed_at timestamptz;

-- GET /subscribers: newest first, keyset on (created_at, id).
CREATE INDEX subscribers_workspace_created ON subscribers (workspace_id, created_at DESC, id DESC);
-- Tag filters and targeting: `tags @> $tags` (the subscriber holds every tag).
CREATE INDEX subscribers_tags ON subscribers USING gin (tags);
-- StreamTargets: active subscribers of a workspace in id order (keyset by id).
CREATE INDEX subscribers_workspace_active_id ON subscribers (workspace_id, id) WHERE status = 'active';
