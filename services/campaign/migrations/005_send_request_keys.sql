-- An idempotency key belongs to the API key that sent it (issue #22): another principal of the
-- workspace (a bound end-user's key) can no longer claim it first or learn that it was used.
-- Empty: sends of the flow service, which has no key. Old replicas insert '' and stay correct
-- among themselves; their records keep replaying for the flow service only.
ALTER TABLE send_requests ADD COLUMN key_id text NOT NULL DEFAULT '';
ALTER TABLE send_requests DROP CONSTRAINT send_requests_pkey, ADD PRIMARY KEY (workspace_id, key_id, idempotency_key);
