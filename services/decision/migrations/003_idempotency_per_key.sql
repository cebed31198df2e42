-- An idempotency key belongs to the API key that used it (issue #22): a bound end-user's key can
-- no longer claim a key the dashboard uses later (its decision then answered 409), nor learn which
-- keys others used. During a rolling deploy, old replicas' idempotent creates fail (their ON
-- CONFLICT names the old index) until they are replaced.
CREATE UNIQUE INDEX questions_idempotency_per_key ON questions (workspace_id, kind, key_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
DROP INDEX questions_idempotency;
