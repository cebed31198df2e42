-- The name of the API key that opened a question, as it was then: the answer page, the Slack
-- message and the email show it beside the asking agent, so an approver sees which of the
-- workspace's programs asks. Null for questions opened before this column.
ALTER TABLE questions ADD COLUMN key_name text;
