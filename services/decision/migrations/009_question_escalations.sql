-- Escalation (issue #24 part 4): a question's `escalation` steps are durable timers on the shared
-- work loop (@herald/workloop). One row per (question, step), recorded with the question's
-- deliveries when its QuestionOpened event is consumed, due `afterSeconds` after the question was
-- opened. A step fires once: in one transaction it records that step's deliveries (the same
-- (question, channel, target) keys, so a target already delivered is not delivered again), appends
-- an `escalated` event to the question's record and marks itself fired. A step whose question is no
-- longer open when it comes due (answered, cancelled, expired) is skipped; one due at or after the
-- question's expiry is recorded skipped and never fires, so escalation never extends a lifetime.
CREATE TABLE question_escalations (
  question_id   text NOT NULL REFERENCES questions (id) ON DELETE CASCADE,
  -- The step's index in the question's escalation (0-based).
  step          integer NOT NULL CHECK (step >= 0),
  -- pending (due at due_at) | fired | skipped (the question was no longer open, or the step came after its expiry)
  state         text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'fired', 'skipped')),
  due_at        timestamptz NOT NULL,
  -- Why a step was skipped: the question's state when it came due.
  reason        text,
  finished_at   timestamptz,
  claim         uuid,
  leased_until  timestamptz,
  -- The namespace (herald.namespace) of the replica that recorded it: only its own replicas work it.
  namespace     text NOT NULL DEFAULT coalesce(current_setting('herald.namespace', true), ''),
  PRIMARY KEY (question_id, step)
);

-- What the escalation loop claims: pending steps by due time.
CREATE INDEX question_escalations_due ON question_escalations (namespace, due_at) WHERE state = 'pending';
