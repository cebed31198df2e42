-- Reusable notification content (/templates). A campaign copies a template's content when it is
-- created, so editing or deleting a template never changes a campaign.
CREATE TABLE templates (
  id           text PRIMARY KEY,
  workspace_id text NOT NULL,
  name         text NOT NULL,
  title        text NOT NULL,
  body         text NOT NULL,
  icon_url     text,
  image_url    text,
  action_url   text,
  created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- Newest-first pages of a workspace.
CREATE INDEX templates_pages ON templates (workspace_id, created_at DESC, id DESC);
