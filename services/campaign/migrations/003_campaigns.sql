-- One model for POST /send and /campaigns: a send is a campaign created and started at once, so
-- notifications become campaigns. The status is the campaign state (docs/campaigns.md):
--   draft, scheduled -> sending (started) -> completed (fan-out done, every queued push settled);
--   sending or active -> paused -> active (resumed; runs like sending).
ALTER TABLE notifications RENAME TO campaigns;
ALTER INDEX notifications_workspace_created RENAME TO campaigns_workspace_created;
ALTER TABLE campaigns DROP CONSTRAINT notifications_status_check;
UPDATE campaigns SET status = 'sending' WHERE status = 'queued';
ALTER TABLE campaigns
  ALTER COLUMN status SET DEFAULT 'draft',
  ADD CONSTRAINT campaigns_status_check CHECK (status IN ('draft', 'scheduled', 'sending', 'active', 'paused', 'completed')),
  -- send: POST /send; campaign: POST /campaigns; question: a question's push (internal, never listed).
  ADD COLUMN kind text NOT NULL DEFAULT 'send' CHECK (kind IN ('send', 'campaign', 'question')),
  ADD COLUMN name text,
  ADD COLUMN template_id text,
  ADD COLUMN scheduled_at timestamptz,
  ADD COLUMN throttle_per_minute integer CHECK (throttle_per_minute > 0),
  ADD COLUMN started_at timestamptz,
  ADD COLUMN updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  ADD COLUMN deleted_at timestamptz,
  ADD COLUMN start_error text,
  -- Engagement the service workers report (impressions and clicks), counted once per subscriber.
  ADD COLUMN impressions bigint NOT NULL DEFAULT 0,
  ADD COLUMN clicks bigint NOT NULL DEFAULT 0,
  -- Worked by the campaign timer loop (@herald/workloop): a scheduled start at scheduled_at, or a
  -- throttled fan-out's next step.
  ADD COLUMN due_at timestamptz,
  ADD COLUMN claim uuid,
  ADD COLUMN leased_until timestamptz,
  ADD COLUMN namespace text NOT NULL DEFAULT coalesce(current_setting('herald.namespace', true), '');
UPDATE campaigns SET name = title, started_at = created_at, updated_at = created_at;
ALTER TABLE campaigns ALTER COLUMN name SET NOT NULL;

DROP INDEX campaigns_workspace_created;
-- Newest-first pages of a workspace's campaigns.
CREATE INDEX campaigns_pages ON campaigns (workspace_id, created_at DESC, id DESC) WHERE kind <> 'question' AND deleted_at IS NULL;
CREATE INDEX campaigns_due ON campaigns (namespace, due_at) WHERE due_at IS NOT NULL;
