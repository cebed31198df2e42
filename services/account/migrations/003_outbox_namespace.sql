-- Outbox rows record the writer's Kafka namespace (herald.namespace, see @herald/db createPool),
-- so a relay publishes only its own namespace's events when namespaces share a database.
ALTER TABLE outbox ADD COLUMN namespace text NOT NULL DEFAULT coalesce(current_setting('herald.namespace', true), '');
CREATE INDEX outbox_namespace_id ON outbox (namespace, id);
