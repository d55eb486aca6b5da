-- The statement diff of authorisations (issue 32, DESIGN section 16): a provider's record of a
-- payment made with capture "manual" says whether its authorisation is still held (status
-- 'authorized'), was captured -- and, where the record says, how much (amount_captured, NULL
-- where it does not: PayPal lists each capture as an entry of its own) -- or released. The diff
-- compares that with our captures and voids (authorization_mismatch). amount_captured joins the
-- diff's covering index, so that the diff's first read stays index-only. A record may be a
-- capture of its own (PayPal's capture of an authorization), kept with the run.
ALTER TABLE statement_records ADD COLUMN amount_captured bigint;
ALTER TABLE statement_records DROP CONSTRAINT statement_records_kind_check;
ALTER TABLE statement_records ADD CONSTRAINT statement_records_kind_check
    CHECK (kind IN ('charge', 'refund', 'capture'));

CREATE INDEX statement_records_diff_captured
    ON statement_records (run_id, match_key COLLATE "C", provider_reference COLLATE "C")
    INCLUDE (amount_minor, currency, status, created_at, kind, amount_refunded, amount_captured);
DROP INDEX statement_records_diff;
ALTER INDEX statement_records_diff_captured RENAME TO statement_records_diff;

ALTER TABLE recon_findings DROP CONSTRAINT recon_findings_category_check;
ALTER TABLE recon_findings ADD CONSTRAINT recon_findings_category_check CHECK (category IN
    ('matched', 'missing_remote', 'missing_local', 'amount_mismatch', 'currency_mismatch',
     'status_mismatch', 'duplicate_remote', 'unresolved_unknown', 'authorization_mismatch',
     'refund_matched', 'refund_missing_remote', 'refund_missing_local', 'refund_amount_mismatch',
     'refund_status_mismatch', 'refund_duplicate_remote', 'refund_unresolved_unknown'));
