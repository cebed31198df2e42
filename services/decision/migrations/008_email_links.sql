-- Email answer links (issue #24, the email channel): {PUBLIC_ORIGIN}/e/<token>, signed, naming
-- the question, the recipient address and the answer (none for an input question: its page has
-- a text field). A link is single use: the answer it gives writes its row here in the answer's
-- own transaction, and a link whose row exists is refused (409) before anything else.

CREATE TABLE email_links (
  question_id  text NOT NULL REFERENCES questions (id) ON DELETE CASCADE,
  -- The recipient, lower-cased.
  address      text NOT NULL,
  -- The answer the link names (confirm: yes | no; select: the option); '' for an input link.
  choice       text NOT NULL,
  used_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (question_id, address, choice)
);
