-- Slack (issue #24 part 2): a workspace connects a Slack app; questions are posted to its default
-- channel or to named Slack users, and answered with the message's buttons.

CREATE TABLE slack_connections (
  workspace_id     text PRIMARY KEY,
  -- From auth.test at connect: interactions are matched to their connection by the payload's team id.
  team_id          text NOT NULL UNIQUE,
  team_name        text NOT NULL,
  bot_user_id      text NOT NULL,
  default_channel  text NOT NULL,
  -- Sealed with CHANNEL_SECRET_KEYS (AES-256-GCM): "<key id>:<base64 of iv | ciphertext | tag>".
  bot_token        text NOT NULL,
  signing_secret   text NOT NULL,
  connected_at     timestamptz NOT NULL DEFAULT now()
);

-- The Slack messages of questions: each is updated (chat.update) once its question is answered,
-- cancelled or expired, on the shared work loop. A click marks its message due a few seconds
-- ahead before it answers, so an update is not lost if the process dies after the answer.
CREATE TABLE slack_messages (
  question_id   text NOT NULL REFERENCES questions (id) ON DELETE CASCADE,
  workspace_id  text NOT NULL,
  channel_id    text NOT NULL,
  ts            text NOT NULL,
  -- pending: shows the question as open; updated: shows how it ended.
  state         text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'updated')),
  attempts      integer NOT NULL DEFAULT 0,
  -- When to look at the question again: a few seconds after posting, then its expiry, sooner after an answer.
  due_at        timestamptz NOT NULL,
  claim         uuid,
  leased_until  timestamptz,
  namespace     text NOT NULL DEFAULT coalesce(current_setting('herald.namespace', true), ''),
  PRIMARY KEY (question_id, channel_id, ts)
);

CREATE INDEX slack_messages_due ON slack_messages (namespace, due_at) WHERE state = 'pending';
