-- Dismissals the service workers report (impressions and clicks have their columns since 003),
-- counted once per subscriber like them.
ALTER TABLE campaigns ADD COLUMN dismissals bigint NOT NULL DEFAULT 0;
