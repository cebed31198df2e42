-- Claims move to the shared work loop (@herald/workloop): a claim leases a message until
-- leased_until and leaves next_attempt_at as the time it is due. A message claimed when this ran
-- had its lease in next_attempt_at: it keeps it.
ALTER TABLE webhook_messages ADD COLUMN leased_until timestamptz;
UPDATE webhook_messages SET leased_until = next_attempt_at WHERE claim IS NOT NULL;
