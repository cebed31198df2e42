-- The tables @herald/webhooks needs in the schema of a service that sends webhooks.

-- One row per webhook, written in the transaction of the change it reports; the dispatcher sends it.
CREATE TABLE webhook_messages (
  id              text PRIMARY KEY,               -- msg_…, the webhook-id header (the receiver's dedupe key)
  workspace_id    text NOT NULL,                  -- whose secrets sign it
  url             text NOT NULL,
  type            text NOT NULL,
  body            text NOT NULL,                  -- the exact bytes posted on every attempt
  status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts        integer NOT NULL DEFAULT 0,     -- attempts started (a claim counts one)
  -- When a pending message is next due; a claim moves it one lease ahead, so a dispatcher that
  -- dies mid-attempt leaves the message to another one after the lease.
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  claim           uuid,                           -- the current claim; results of a stale claim are not applied
  created_at      timestamptz NOT NULL DEFAULT now(),
  completed_at    timestamptz,
  -- The writer's namespace (herald.namespace, see @herald/db createPool): parallel test stacks
  -- sharing a database each send their own.
  namespace       text NOT NULL DEFAULT coalesce(current_setting('herald.namespace', true), '')
);
CREATE INDEX webhook_messages_due ON webhook_messages (namespace, next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_messages_completed ON webhook_messages (completed_at) WHERE status <> 'pending';

-- Every attempt, successful or not.
CREATE TABLE webhook_attempts (
  message_id   text NOT NULL REFERENCES webhook_messages (id) ON DELETE CASCADE,
  attempt      integer NOT NULL,
  attempted_at timestamptz NOT NULL,
  status_code  integer,                           -- null when no response came
  error        text,                              -- null on a 2xx
  duration_ms  integer NOT NULL,
  PRIMARY KEY (message_id, attempt)
);
