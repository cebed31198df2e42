-- Finished runs are deleted FLOW_RUN_RETENTION_DAYS after they finished (the run loop's
-- housekeeping): this index finds them oldest first without reading the runs in flight.
CREATE INDEX flow_runs_finished ON flow_runs (namespace, finished_at) WHERE finished_at IS NOT NULL;
