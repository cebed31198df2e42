-- One owner for opening a question (issue #24): the decision service opens it, writes its
-- QuestionOpened event in the same transaction, and delivers it from that event, once per
-- (question, channel, target). A delivery is a row here, worked on the shared work loop
-- (@herald/workloop) and retried with backoff while its channel is unavailable.

-- The site of the key that opened it: web push goes to that site's approver devices. NULL for
-- questions stored before this migration (nothing delivers them any more).
ALTER TABLE questions ADD COLUMN site_id text;

CREATE TABLE question_deliveries (
  question_id   text NOT NULL REFERENCES questions (id) ON DELETE CASCADE,
  -- web_push (later: slack, email)
  channel       text NOT NULL,
  -- Who on that channel. web_push: approver_devices (those the question addresses).
  target        text NOT NULL,
  -- pending (due at due_at) | delivered | skipped (the question was no longer open) | failed (refused for good)
  state         text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'skipped', 'failed')),
  attempts      integer NOT NULL DEFAULT 0,
  last_error    text,
  -- What the channel made of it. web_push: the notification id (empty: no approver device matched).
  result        text,
  -- How many it reached (web_push: the approver devices targeted).
  reached       integer,
  created_at    timestamptz NOT NULL DEFAULT now(),
  due_at        timestamptz NOT NULL DEFAULT now(),
  finished_at   timestamptz,
  claim         uuid,
  leased_until  timestamptz,
  -- The namespace (herald.namespace) of the replica that recorded it: only its own replicas work it.
  namespace     text NOT NULL DEFAULT coalesce(current_setting('herald.namespace', true), ''),
  PRIMARY KEY (question_id, channel, target)
);

-- What the delivery loop claims: pending rows by due time.
CREATE INDEX question_deliveries_due ON question_deliveries (namespace, due_at) WHERE state = 'pending';
