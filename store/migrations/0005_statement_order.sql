-- The statement diff reads a run's records in (match_key, provider_reference) order. The index of
-- 0004 had the match key only, so PostgreSQL sorted every key group again; with both columns it
-- streams the run in order (EXPLAIN ANALYZE over 1,000,000 records: 1.5 s instead of 4.3 s).
CREATE INDEX statement_records_order
    ON statement_records (run_id, match_key COLLATE "C", provider_reference COLLATE "C");
DROP INDEX statement_records_match;
-- Records listed without our operation ID, paired by provider reference before each diff: found
-- through this instead of a scan of the whole run.
CREATE INDEX statement_records_unpaired ON statement_records (run_id) WHERE operation_id IS NULL;
