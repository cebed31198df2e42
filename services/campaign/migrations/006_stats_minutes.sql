-- The campaign counters per UTC minute, kept beside the lifetime ones (in the same transaction as
-- them, once per event), so GET /campaigns/{id}/stats/series can chart them. Hours and days are
-- sums of minutes.
CREATE TABLE campaign_stats_minutes (
  workspace_id text NOT NULL,
  campaign_id text NOT NULL,
  minute timestamptz NOT NULL,
  sent bigint NOT NULL DEFAULT 0,
  delivered bigint NOT NULL DEFAULT 0,
  clicked bigint NOT NULL DEFAULT 0,
  dismissed bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (workspace_id, campaign_id, minute)
);
