-- Subscriber listing, sending targets, lifecycle timestamps, and the outbox/dedupe tables.

-- When a subscriber stopped being active (unsubscribed, expired, bounced); NULL while active.
ALTER TABLE subscribers ADD COLUMN unsubscribed_at timestamptz;

-- GET /subscribers: newest first, keyset on (created_at, id).
CREATE INDEX subscribers_workspace_created ON subscribers (workspace_id, created_at DESC, id DESC);
-- Tag filters and targeting: `tags @> $tags` (the subscriber holds every tag).
CREATE INDEX subscribers_tags ON subscribers USING gin (tags);
-- StreamTargets: active subscribers of a workspace in id order (keyset by id).
CREATE INDEX subscribers_workspace_active_id ON subscribers (workspace_id, id) WHERE status = 'active';

-- Transactional outbox and consumer dedupe (see @herald/bus).
CREATE TABLE outbox (
  id          bigserial PRIMARY KEY,
  event_id    uuid NOT NULL UNIQUE,
  topic       text NOT NULL,
  message_key text NOT NULL,
  payload     bytea NOT NULL,
  headers     jsonb NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now(),
  -- The writer's Kafka namespace (herald.namespace, see @herald/db createPool).
  namespace   text NOT NULL DEFAULT coalesce(current_setting('herald.namespace', true), '')
);
CREATE INDEX outbox_namespace_id ON outbox (namespace, id);

CREATE TABLE processed_events (
  consumer     text NOT NULL,
  event_id     uuid NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, event_id)
);
