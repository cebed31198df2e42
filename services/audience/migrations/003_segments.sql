-- Saved audiences (/segments): a named filter over what subscribers hold. The filter is stored as
-- the SegmentFilter message in its JSON form; the audience service turns it into SQL.
CREATE TABLE segments (
  id           text PRIMARY KEY,
  workspace_id text NOT NULL,
  name         text NOT NULL,
  filter       jsonb NOT NULL DEFAULT '{}',
  created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- Newest-first pages of a workspace.
CREATE INDEX segments_pages ON segments (workspace_id, created_at DESC, id DESC);

-- Resolving a segment over a large audience: each dimension has an index the planner can combine
-- (bitmap AND) with the workspace's. Tags use subscribers_tags (GIN, 002) for all/any; created
-- before/after uses subscribers_workspace_created (002).
-- customData equality: `custom_data @> '{"plan": "pro"}'`.
CREATE INDEX subscribers_custom_data ON subscribers USING gin (custom_data jsonb_path_ops);
-- Browser and OS match case-insensitively, as a whole value or as its first words ("Firefox"
-- matches "Firefox 128"): equality and left-anchored LIKE on lower(...), hence text_pattern_ops.
CREATE INDEX subscribers_workspace_browser ON subscribers (workspace_id, lower(browser) text_pattern_ops);
CREATE INDEX subscribers_workspace_os ON subscribers (workspace_id, lower(os) text_pattern_ops);
CREATE INDEX subscribers_workspace_country ON subscribers (workspace_id, country);
