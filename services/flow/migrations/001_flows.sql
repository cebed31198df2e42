-- Flows (docs/flows.md): a trigger and an ordered list of steps. Replacing the steps makes a new
-- version; runs follow the version they started with, so a version is never changed or removed
-- while its flow exists.
CREATE TABLE flows (
  id text PRIMARY KEY,
  workspace_id text NOT NULL,
  site_id text NOT NULL,
  name text NOT NULL,
  description text NOT NULL DEFAULT '',
  trigger_type text NOT NULL
    CHECK (trigger_type IN ('subscription', 'unsubscription', 'notification_click', 'notification_impression', 'notification_dismiss')),
  trigger_campaign_id text,
  status text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'active', 'paused', 'archived')),
  version integer NOT NULL DEFAULT 1,
  -- Runs started, ever: incremented in the transaction that inserts each run.
  execution_count bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- Newest-first pages of a workspace's flows.
CREATE INDEX flows_pages ON flows (workspace_id, created_at DESC, id DESC);
-- The flows an event starts runs of.
CREATE INDEX flows_triggered ON flows (workspace_id, trigger_type) WHERE status = 'active';

-- Each version's steps, in order: [{id, stepType, config}].
CREATE TABLE flow_versions (
  flow_id text NOT NULL REFERENCES flows (id) ON DELETE CASCADE,
  version integer NOT NULL,
  steps jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (flow_id, version)
);

-- One run: a subscriber walking one version of a flow's steps. Worked by the run loop
-- (@herald/workloop) while due_at is set: a run due now executes its next steps; a run parked on
-- a delay waits for due_at. Deleting the flow deletes its runs (a claimed run's outcome then
-- changes nothing).
CREATE TABLE flow_runs (
  id text PRIMARY KEY,
  flow_id text NOT NULL,
  version integer NOT NULL,
  workspace_id text NOT NULL,
  site_id text NOT NULL,
  subscriber_id text NOT NULL,
  trigger_type text NOT NULL,
  trigger_event_id text NOT NULL,
  -- running: a step is due now; waiting: parked on a delay; the rest are final.
  state text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'waiting', 'completed', 'exited', 'cancelled', 'failed')),
  step_index integer NOT NULL DEFAULT 0,
  end_reason text,
  notification_ids text[] NOT NULL DEFAULT '{}',
  due_at timestamptz DEFAULT clock_timestamp(),
  claim uuid,
  leased_until timestamptz,
  namespace text NOT NULL DEFAULT coalesce(current_setting('herald.namespace', true), ''),
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  finished_at timestamptz,
  FOREIGN KEY (flow_id, version) REFERENCES flow_versions (flow_id, version) ON DELETE CASCADE,
  -- One run per (flow, subscriber, event): a redelivered event never starts a second.
  UNIQUE (flow_id, subscriber_id, trigger_event_id)
);
-- No re-entry: at most one run of a flow in flight per subscriber.
CREATE UNIQUE INDEX flow_runs_in_flight ON flow_runs (flow_id, subscriber_id) WHERE state IN ('running', 'waiting');
CREATE INDEX flow_runs_due ON flow_runs (namespace, due_at) WHERE due_at IS NOT NULL;
CREATE INDEX flow_runs_pages ON flow_runs (flow_id, created_at DESC, id DESC);
CREATE INDEX flow_runs_subscriber ON flow_runs (workspace_id, subscriber_id) WHERE state IN ('running', 'waiting');
