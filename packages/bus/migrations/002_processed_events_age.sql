-- handleOnce prunes markers older than its retention (PROCESSED_EVENTS_RETENTION_MS) by age.
CREATE INDEX processed_events_processed_at ON processed_events (processed_at);
