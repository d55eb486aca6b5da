-- A provider that refuses our request before executing anything (malformed, missing or unknown
-- parameters, bad configuration or credentials) is not the customer's decline: the attempt's
-- outcome is 'rejected', and the payment goes to review with the code 'request_rejected' (the
-- provider's code is the attempt's error_class, 'request_rejected:<code>'; its message is in the
-- review reason). docs/operations.md has the runbook entry.
ALTER TABLE payment_attempts DROP CONSTRAINT payment_attempts_outcome_check;
ALTER TABLE payment_attempts ADD CONSTRAINT payment_attempts_outcome_check CHECK (outcome IN
    ('succeeded', 'declined', 'pending', 'not_sent', 'unknown', 'rejected'));

ALTER TABLE payments DROP CONSTRAINT payments_review_code_check;
ALTER TABLE payments ADD CONSTRAINT payments_review_code_check CHECK (review_code IN
    ('no_lookup', 'lookup_failing', 'outside_key_window', 'no_idempotency', 'schedule_exhausted',
     'remote_mismatch', 'remote_duplicate', 'requires_action', 'remote_unrecognised',
     'request_rejected'));

-- `payrecon serve` counts rejected requests per provider and code at every scrape of /metrics,
-- and nightly groups the payments in review by them: both read only these rows.
CREATE INDEX payment_attempts_rejected ON payment_attempts (tenant_id, payment_id, error_class)
    WHERE outcome = 'rejected';
