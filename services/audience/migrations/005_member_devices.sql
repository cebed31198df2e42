-- A console member's device: a browser the member turned notifications on in, from a signed-in
-- session (the session is the proof; a public subscribe never sets it). Such a subscriber is an
-- approver device of that member only: questions addressed to the member reach it, and no
-- campaign, send, flow or unaddressed question does.
ALTER TABLE subscribers ADD COLUMN member_id text;
CREATE INDEX subscribers_member ON subscribers (workspace_id, member_id) WHERE member_id IS NOT NULL;
