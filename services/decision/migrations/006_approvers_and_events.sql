-- Who may answer, who did, and the record (issue #24 parts 3 and 5).

-- [{kind, id}]: who may answer; empty: the holder of an answer link (and the caller's own key).
ALTER TABLE questions ADD COLUMN approvers jsonb NOT NULL DEFAULT '[]';
-- [{afterSeconds, channels, approvers}]: deliveries made while the question stays unanswered.
ALTER TABLE questions ADD COLUMN escalation jsonb NOT NULL DEFAULT '[]';
-- {kind, id, displayName, channel, at}: who answered (NULL until answered, and for answers
-- recorded before this migration).
ALTER TABLE questions ADD COLUMN answered_by jsonb;

-- What happened to a question, append-only: opened, delivered, viewed, answered, refused,
-- escalated, cancelled, expired. Each entry carries the hash of the one before it (a chain per
-- question), so a changed or removed entry shows: hash = sha256(prev_hash || the entry's
-- canonical JSON), computed by @herald/domain's questionEventHash.
CREATE TABLE question_events (
  question_id  text NOT NULL REFERENCES questions (id) ON DELETE CASCADE,
  seq          integer NOT NULL CHECK (seq >= 1),
  kind         text NOT NULL,
  at           timestamptz NOT NULL,
  -- Who did it ({kind, id, displayName, channel}); NULL for the system (a delivery, the expiry).
  actor        jsonb,
  detail       jsonb NOT NULL DEFAULT '{}',
  -- The first entry's is '' (empty).
  prev_hash    text NOT NULL,
  hash         text NOT NULL,
  PRIMARY KEY (question_id, seq)
);

-- Append-only: the service's role may add entries, never change or remove them.
CREATE FUNCTION question_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'question_events is append-only';
END;
$$;
CREATE TRIGGER question_events_append_only BEFORE UPDATE OR DELETE ON question_events
  FOR EACH ROW EXECUTE FUNCTION question_events_append_only();
