-- The audit trail's `expired` entry (issue #24 part 5). Expiry is computed on read, so nothing
-- changes when a question expires; the expiry sweep (the shared work loop, at expires_at) now
-- visits every unanswered question once it expired, appends its `expired` event and, for one with
-- a callbackUrl, enqueues the expiry webhook, all in one transaction. expiry_recorded_at marks a
-- question swept (expiry_reported_at still marks its webhook, which replicas of the previous
-- version send while both run).
ALTER TABLE questions ADD COLUMN expiry_recorded_at timestamptz;

-- Questions that expired before their record existed get no `expired` entry; those whose
-- expiry webhook is still to be sent stay for the sweep.
UPDATE questions SET expiry_recorded_at = expires_at
 WHERE status = 'pending' AND expires_at <= now() AND (callback_url IS NULL OR expiry_reported_at IS NOT NULL);

-- What the expiry sweep looks for: unanswered questions not yet swept, by expiry.
CREATE INDEX questions_unrecorded_expiry ON questions (namespace, expires_at)
  WHERE status = 'pending' AND expiry_recorded_at IS NULL;
