-- The statement diff of refunds (issue 31, DESIGN section 16): a provider that lists its refunds
-- in a window (Stripe, Square, PayPal) has them stored beside its charges, each record of a kind;
-- our refunds (operations of kind refund) are diffed against them by operation ID, in the same
-- merge as the charges. A charge's refunded amount is kept in the diff's covering index: where
-- the refunds are not listed, what the provider refunded of a charge is checked against what our
-- refunds of it hold (payments.refund_held_minor).
ALTER TABLE statement_records
    ADD COLUMN kind text NOT NULL DEFAULT 'charge' CHECK (kind IN ('charge', 'refund'));

CREATE INDEX statement_records_diff_kinds
    ON statement_records (run_id, match_key COLLATE "C", provider_reference COLLATE "C")
    INCLUDE (amount_minor, currency, status, created_at, kind, amount_refunded);
DROP INDEX statement_records_diff;
ALTER INDEX statement_records_diff_kinds RENAME TO statement_records_diff;

-- A finding of a refund names the refund (and, in payment_id, the payment it refunds).
ALTER TABLE recon_findings ADD COLUMN refund_id uuid;
ALTER TABLE recon_findings DROP CONSTRAINT recon_findings_category_check;
ALTER TABLE recon_findings ADD CONSTRAINT recon_findings_category_check CHECK (category IN
    ('matched', 'missing_remote', 'missing_local', 'amount_mismatch', 'currency_mismatch',
     'status_mismatch', 'duplicate_remote', 'unresolved_unknown',
     'refund_matched', 'refund_missing_remote', 'refund_missing_local', 'refund_amount_mismatch',
     'refund_status_mismatch', 'refund_duplicate_remote', 'refund_unresolved_unknown'));

-- Our side of a statement's refunds, read for one provider and window as payments_statement reads
-- the charges; and a provider's refund record without our operation ID paired by its reference.
CREATE INDEX operations_statement ON operations (provider, (coalesce(first_attempt_at, created_at)));
CREATE INDEX operations_provider_reference ON operations (provider, provider_reference)
    WHERE provider_reference IS NOT NULL;

-- Whether a complete run diffed the provider's refunds (what its report lists: its refund
-- categories, or the fact that the provider's refunds were not read).
ALTER TABLE recon_runs ADD COLUMN refunds_listed boolean NOT NULL DEFAULT false;
