-- The tables @herald/bus needs in every service schema that publishes or consumes events.

-- Transactional outbox: written in the transaction of the state change, published by the relay.
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

-- Idempotent consumption: one row per (consumer, event) whose effect has committed.
CREATE TABLE processed_events (
  consumer     text NOT NULL,
  event_id     uuid NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, event_id)
);
