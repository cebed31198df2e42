-- GET /ask and GET /decisions: a workspace's questions of one kind, newest first, page by page.
CREATE INDEX questions_listing ON questions (workspace_id, kind, created_at DESC, id DESC);
