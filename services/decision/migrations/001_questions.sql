-- Questions put to a person: POST /ask questions and /decisions, one table, told apart by kind.
-- Expiry is not a stored state: a pending row past expires_at reads as expired, so nothing has to
-- run for a question to expire and an unanswered one can never turn into an approval.

CREATE TABLE questions (
  id               text PRIMARY KEY,
  workspace_id     text NOT NULL,
  kind             text NOT NULL CHECK (kind IN ('ask', 'decision')),
  key_id           text NOT NULL,
  type             text NOT NULL CHECK (type IN ('confirm', 'select', 'input')),
  question         text NOT NULL,
  options          jsonb NOT NULL DEFAULT '[]',
  context          text,
  placeholder      text,
  agent_name       text,
  -- The workspace approval mode when it was asked: browser | terminal (terminal: no push).
  mode             text NOT NULL,
  -- Decisions: user | owner | team, and the end-user addressed (a bound key sees only its own).
  audience         text,
  external_id      text,
  tool_name        text,
  tool_target      text,
  parameters       jsonb,
  reachability     jsonb,
  -- Asks: the browser subscribers to push to ({subscriberIds, externalIds, tags}).
  target           jsonb,
  callback_url     text,
  idempotency_key  text,
  request_hash     text,
  status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'answered', 'cancelled')),
  answer           text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  expires_at       timestamptz NOT NULL,
  answered_at      timestamptz,
  cancelled_at     timestamptz,
  -- When the expiry of an unanswered question with a callback was reported (its webhook): once.
  expiry_reported_at timestamptz,
  -- The namespace (herald.namespace) it was asked in: that namespace's sweep reports its expiry,
  -- so stacks sharing a database never report each other's questions.
  namespace        text NOT NULL DEFAULT coalesce(current_setting('herald.namespace', true), '')
);

CREATE UNIQUE INDEX questions_idempotency ON questions (workspace_id, kind, idempotency_key) WHERE idempotency_key IS NOT NULL;
-- The per-workspace limit on open asks counts these.
CREATE INDEX questions_pending_asks ON questions (workspace_id, expires_at) WHERE kind = 'ask' AND status = 'pending';
-- What the expiry sweep looks for: unanswered questions with a callback, not yet reported.
CREATE INDEX questions_unreported_expiry ON questions (namespace, expires_at)
  WHERE status = 'pending' AND callback_url IS NOT NULL AND expiry_reported_at IS NULL;
