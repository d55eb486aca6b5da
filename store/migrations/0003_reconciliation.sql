-- The reconciler and the review queue (DESIGN sections 7 and 8).

-- When the payment was first and last sent: the key window is measured from the first attempt, the
-- settle delay from the last. Claims set both; existing rows take them from their attempts.
ALTER TABLE payments ADD COLUMN first_attempt_at timestamptz;
ALTER TABLE payments ADD COLUMN last_attempt_at timestamptz;
-- Status queries since the payment last became unknown, and how many of them failed in a row.
ALTER TABLE payments ADD COLUMN lookup_count integer NOT NULL DEFAULT 0;
ALTER TABLE payments ADD COLUMN lookup_failures integer NOT NULL DEFAULT 0;
-- Times the reconciler sent the payment again after the provider confirmed it absent.
ALTER TABLE payments ADD COLUMN resend_count integer NOT NULL DEFAULT 0;
-- Why a payment sits in review, as a stable code (docs/operations.md has a runbook entry per code);
-- review_reason holds the sentence for the operator.
ALTER TABLE payments ADD COLUMN review_code text CHECK (review_code IN
    ('no_lookup', 'lookup_failing', 'outside_key_window', 'no_idempotency', 'schedule_exhausted',
     'remote_mismatch', 'remote_duplicate', 'requires_action', 'remote_unrecognised'));
ALTER TABLE payments ADD CONSTRAINT payments_review_code_only_in_review
    CHECK (review_code IS NULL OR state = 'needs_review');

UPDATE payments p
   SET first_attempt_at = a.first_at, last_attempt_at = a.last_at
  FROM (SELECT tenant_id, payment_id, min(started_at) AS first_at, max(started_at) AS last_at
          FROM payment_attempts GROUP BY tenant_id, payment_id) a
 WHERE p.tenant_id = a.tenant_id AND p.payment_id = a.payment_id;

-- The reconciler's and operators' queues.
CREATE INDEX payments_unknown_due ON payments (provider, next_attempt_at) WHERE state = 'unknown';
CREATE INDEX payments_in_review ON payments (provider, updated_at) WHERE state = 'needs_review';
CREATE INDEX payments_state_created ON payments (state, created_at);
-- Operators name payments by ID alone (review show, resolve): without the tenant.
CREATE INDEX payments_payment_id ON payments (payment_id);

-- Every status query a reconciler or an operator made, whatever it found.
CREATE TABLE payment_lookups (
    tenant_id          uuid        NOT NULL,
    payment_id         uuid        NOT NULL,
    lookup_id          bigint      GENERATED ALWAYS AS IDENTITY,
    generation         bigint      NOT NULL,
    actor              text        NOT NULL,
    at                 timestamptz NOT NULL DEFAULT now(),
    status             text        NOT NULL CHECK (status IN ('found', 'not_found', 'failed', 'not_asked')),
    remote_state       text,
    remote_raw_status  text,
    remote_amount      bigint,
    remote_currency    text,
    provider_reference text,
    duplicates         integer     NOT NULL DEFAULT 0,
    http_status        integer,
    error_class        text,
    detail             text        CHECK (octet_length(detail) <= 4096),
    decision           text        NOT NULL,
    reason             text,
    applied            boolean     NOT NULL,
    PRIMARY KEY (tenant_id, payment_id, lookup_id),
    FOREIGN KEY (tenant_id, payment_id) REFERENCES payments (tenant_id, payment_id)
);

CREATE INDEX audit_log_subject ON audit_log (subject_type, subject_id, audit_id);
