-- Retries move to the shared work loop (@herald/workloop): a worker leases the retries it sends
-- (claim, leased_until) instead of holding their row locks for the length of the pushes.
ALTER TABLE retries ADD COLUMN claim uuid, ADD COLUMN leased_until timestamptz;
