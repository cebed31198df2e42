-- The head of a question's record (its last entry's seq and hash), read under the record's lock in
-- one round trip instead of two: appendEvent took the lock, then read the head, then inserted, and
-- every answer paid those round trips inside its transaction. The function is VOLATILE, so under
-- READ COMMITTED its SELECT takes a snapshot after the lock is granted and sees the entry the
-- previous holder committed (one statement of the caller's could not: its snapshot is taken before
-- the lock). The lock is the same transaction-level advisory lock as before, so appends to one
-- question stay serialised and the chain has no forks.
-- (search_path is the schema it is made in: whoever calls it may have another.)
CREATE FUNCTION question_events_head(question text) RETURNS TABLE (seq integer, hash text)
  LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('herald.decision.events:' || question));
  RETURN QUERY SELECT e.seq, e.hash FROM question_events e WHERE e.question_id = question ORDER BY e.seq DESC LIMIT 1;
END;
$$;
