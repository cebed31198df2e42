-- An external id is verified only when it was proven: an identity-verification proof made with
-- the workspace's secret, or a pairing/enrollment link. Only verified subscribers are approver
-- devices (counted for reachability, sent questions); campaigns and /send reach everyone.
-- Existing external ids were never proven, so they start unverified.
ALTER TABLE subscribers ADD COLUMN external_id_verified boolean NOT NULL DEFAULT false;
-- Questions and reachability counts look up a workspace's verified devices (of one external id).
CREATE INDEX subscribers_verified ON subscribers (workspace_id, external_id) WHERE external_id_verified AND status = 'active';
