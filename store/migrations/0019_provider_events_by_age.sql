-- The retention of provider events (`payrecon events purge`, issue 36) reads them by age: the
-- count of what the retention lets go and what it keeps, and the batches that delete. Without an
-- index on the age, each run read the whole table, raw bodies and all, whatever it then deleted.
-- An event's first delivery (received_at) is never later than its last (last_received_at), so
-- the events old enough by their last delivery are among those old enough by their first: this
-- index bounds both reads to the events old enough, in the order the batches take them.
CREATE INDEX provider_events_by_age ON provider_events (received_at, event_id);
COMMENT ON INDEX provider_events_by_age IS
    'events purge: the events old enough by their first delivery, in batches (keyset)';
