-- A question's record stays append-only entry by entry, but goes with its question: deleting a
-- question (a workspace's data erased, a benchmark cleaning up) cascades to its events, which the
-- trigger of migration 006 refused, so no question could ever be deleted. An entry may now be
-- deleted only once its question is gone (the cascade runs after the question's own delete), so
-- removing or changing single entries of a live question's record is still refused.
-- (The questions table is named with the trigger's own schema: whoever deletes may have another search_path.)
CREATE OR REPLACE FUNCTION question_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  question_left boolean;
BEGIN
  IF TG_OP = 'DELETE' THEN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.questions WHERE id = $1)', TG_TABLE_SCHEMA) INTO question_left USING OLD.question_id;
    IF NOT question_left THEN
      RETURN OLD;
    END IF;
  END IF;
  RAISE EXCEPTION 'question_events is append-only';
END;
$$;
