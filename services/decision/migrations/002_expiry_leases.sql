-- Expiry reports move to the shared work loop (@herald/workloop): a sweeper leases the expired
-- questions it reports (claim, leased_until) instead of holding their row locks.
ALTER TABLE questions ADD COLUMN claim uuid, ADD COLUMN leased_until timestamptz;
