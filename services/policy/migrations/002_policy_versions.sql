-- Every write of a workspace's policy, kept: its text (NULL for a DELETE), who wrote it, when.
-- The newest version of a workspace is the one in force (policies.version).

CREATE TABLE policy_versions (
  workspace_id    text NOT NULL,
  version         bigint NOT NULL,
  policy          text,
  -- key | member; NULL when not known (versions written before this table existed).
  changed_by_kind text CHECK (changed_by_kind IN ('key', 'member')),
  changed_by_id   text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, version),
  CHECK ((changed_by_kind IS NULL) = (changed_by_id IS NULL))
);

-- The policy in force before this migration is its workspace's first kept version.
INSERT INTO policy_versions (workspace_id, version, policy, created_at)
SELECT workspace_id, version, policy, updated_at FROM policies;
