-- A job's recipients are leased while a worker pushes them (claim, leased_until): a redelivered
-- job (a rebalance, a worker presumed dead) takes over only recipients whose lease ran out, so a
-- worker that is merely slow is never pushed over. Rows 'sending' before this have no lease and
-- are taken over at once, as before.
ALTER TABLE deliveries ADD COLUMN claim uuid, ADD COLUMN leased_until timestamptz;
