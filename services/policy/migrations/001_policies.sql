-- The workspace Cedar policy (one per workspace) and the record of every authorization verdict.

CREATE TABLE policies (
  workspace_id  text PRIMARY KEY,
  -- NULL after DELETE: the workspace has no policy (everything is denied); the row keeps the version.
  policy        text,
  -- Bumped on every write; replicas compare it with their cached copy on each evaluation.
  version       bigint NOT NULL,
  updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE authorizations (
  id            text PRIMARY KEY,
  workspace_id  text NOT NULL,
  key_id        text NOT NULL,
  -- The request as evaluated: toolName, toolTarget, actor, environment, parameters, externalId.
  request       jsonb NOT NULL,
  verdict       text NOT NULL CHECK (verdict IN ('allow', 'deny', 'requires_human')),
  -- The Cedar policy id that decided; NULL when none did.
  policy_id     text,
  reason        text NOT NULL,
  -- The policy version evaluated (0: none).
  policy_version bigint NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX authorizations_workspace_created ON authorizations (workspace_id, created_at DESC);
