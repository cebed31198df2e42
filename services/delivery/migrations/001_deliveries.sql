-- One row per (notification, subscriber): the dedupe key and the recipient's state.

CREATE TABLE deliveries (
  notification_id  text NOT NULL,
  subscriber_id    text NOT NULL,
  workspace_id     text NOT NULL,
  -- sending: claimed by a worker; retrying: waiting in `retries`; the rest are final.
  status           text NOT NULL CHECK (status IN ('sending', 'retrying', 'delivered', 'failed', 'expired')),
  attempts         integer NOT NULL DEFAULT 0,
  last_status_code integer,
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (notification_id, subscriber_id)
);

-- Pushes to try again later (429, 5xx, timeouts, resets), with what is needed to send them.
CREATE TABLE retries (
  notification_id text NOT NULL,
  subscriber_id   text NOT NULL,
  workspace_id    text NOT NULL,
  site_id         text NOT NULL,
  endpoint        text NOT NULL,
  p256dh          text NOT NULL,
  auth            text NOT NULL,
  payload         bytea NOT NULL,
  ttl_seconds     integer NOT NULL,
  urgency         text NOT NULL,
  topic           text NOT NULL,
  attempts        integer NOT NULL,
  next_attempt_at timestamptz NOT NULL,
  PRIMARY KEY (notification_id, subscriber_id)
);
CREATE INDEX retries_due ON retries (next_attempt_at);
