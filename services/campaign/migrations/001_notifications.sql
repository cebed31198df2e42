-- Notifications (one per POST /send), their idempotency records and monthly usage.

CREATE TABLE notifications (
  id                text PRIMARY KEY,
  workspace_id      text NOT NULL,
  site_id           text NOT NULL,
  -- queued: durable, not yet fanned out; sending: fan-out or deliveries outstanding;
  -- completed: every recipient handed to the fleet has a final state.
  status            text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'sending', 'completed')),
  title             text NOT NULL,
  body              text NOT NULL,
  url               text,
  icon_url          text,
  image_url         text,
  -- audience.v1.Targeting as JSON: {subscriberIds, externalIds, tags}.
  targeting         jsonb NOT NULL,
  targeted          bigint NOT NULL,
  -- Fan-out progress: recipients handed to the fleet, the resume cursor, and whether it finished.
  queued            bigint NOT NULL DEFAULT 0,
  fanout_cursor     text NOT NULL DEFAULT '',
  fanout_batches    integer NOT NULL DEFAULT 0,
  fanout_done       boolean NOT NULL DEFAULT false,
  delivered         bigint NOT NULL DEFAULT 0,
  failed            bigint NOT NULL DEFAULT 0,
  expired           bigint NOT NULL DEFAULT 0,
  last_status_code  integer,
  last_outcome      text,
  last_reported_at  timestamptz,
  created_at        timestamptz NOT NULL DEFAULT now(),
  completed_at      timestamptz
);
CREATE INDEX notifications_workspace_created ON notifications (workspace_id, created_at DESC);

-- A replayed Idempotency-Key returns the first result; the primary key serialises concurrent ones.
CREATE TABLE send_requests (
  workspace_id    text NOT NULL,
  idempotency_key text NOT NULL,
  request_hash    text NOT NULL,
  -- Deferred, so a send claims its key before it writes the notification.
  notification_id text NOT NULL REFERENCES notifications (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
  sent            bigint NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, idempotency_key)
);

-- Notifications counted against the plan's monthly allowance (UTC calendar months).
CREATE TABLE monthly_usage (
  workspace_id text NOT NULL,
  month        date NOT NULL,
  sent         bigint NOT NULL CHECK (sent >= 0),
  PRIMARY KEY (workspace_id, month)
);
