-- An operation the provider accepted (an Adyen refund answered `received`: its outcome comes only
-- by the provider's notification) and cannot be asked about waits for that notification for the
-- provider's notification window (notification_wait_s); when none came, it goes to review with the
-- code 'notification_missing' (docs/operations.md has the runbook entry).
ALTER DOMAIN review_code DROP CONSTRAINT review_code_check;
ALTER DOMAIN review_code ADD CONSTRAINT review_code_check
    CHECK (VALUE IN ('no_lookup', 'lookup_failing', 'outside_key_window', 'no_idempotency',
                     'schedule_exhausted', 'remote_mismatch', 'remote_duplicate', 'requires_action',
                     'remote_unrecognised', 'request_rejected', 'notification_missing'));
