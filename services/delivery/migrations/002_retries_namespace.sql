-- A retry belongs to the namespace (herald.namespace) of the worker that scheduled it: only that
-- namespace's workers send it, so stacks sharing a database never take each other's retries.
ALTER TABLE retries ADD COLUMN namespace text NOT NULL DEFAULT coalesce(current_setting('herald.namespace', true), '');
DROP INDEX retries_due;
CREATE INDEX retries_due ON retries (namespace, next_attempt_at);
