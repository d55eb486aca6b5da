-- The statement diff reads a whole run in (match_key, provider_reference) order, but only the
-- columns a key's category depends on. With those in the index, and the run's pages marked
-- all-visible by the VACUUM that ends each listing, PostgreSQL reads the run from the index alone
-- (an index-only scan: over 1,000,000 records, 0.74 s instead of 1.19 s). Also serves the second
-- read of the few keys that did not match, by (run_id, match_key).
CREATE INDEX statement_records_diff
    ON statement_records (run_id, match_key COLLATE "C", provider_reference COLLATE "C")
    INCLUDE (amount_minor, currency, status, created_at);
DROP INDEX statement_records_order;
