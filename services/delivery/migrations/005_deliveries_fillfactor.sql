-- A delivery row is written twice: inserted when a worker claims it, then updated once with its
-- outcome. Half of each page is left free, so that update fits beside the row (a HOT update: no
-- new primary-key entry, about a third less WAL per push); the row's first version is then pruned.
-- Applies to pages written from now on.
ALTER TABLE deliveries SET (fillfactor = 50);
