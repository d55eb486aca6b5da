-- Refunds (issue 31, DESIGN section 16): the second kind of money movement. A payment's money
-- movements beyond its charge are operations: each with its own ID, its operation ID (the key the
-- provider deduplicates by), the payment's lifecycle (payment_state: pending -> processing ->
-- succeeded | failed | retry_scheduled | unknown -> needs_review), a lease and a generation, in
-- one table for every kind. The charge's own operation is its payment row (intake writes both in
-- one statement); capture and void of an authorisation will be the next kinds here.

CREATE DOMAIN operation_kind AS text CHECK (VALUE IN ('refund'));
CREATE DOMAIN refund_reason AS text
    CHECK (VALUE IN ('duplicate', 'fraudulent', 'requested_by_customer'));

-- Never more than was charged, held in the database under concurrency: the amount of a payment's
-- refunds that succeeded, are in flight, unknown or in review. A refund is taken only by the one
-- UPDATE that raises it, whose WHERE is re-read on the row's newest version when it waited for
-- another writer: concurrent refunds of one payment queue on its row, and each sees what the
-- others took. A refund that fails gives its amount back in the statement that fails it.
ALTER TABLE payments ADD COLUMN refund_held_minor bigint NOT NULL DEFAULT 0;
ALTER TABLE payments ADD CONSTRAINT payments_refunds_within_charge
    CHECK (refund_held_minor >= 0
           AND refund_held_minor <= coalesce(charged_amount_minor, amount_minor));

CREATE TABLE operations (
    tenant_id            uuid NOT NULL,
    id                   uuid NOT NULL,            -- the resource's ID: a refund's ID
    payment_id           uuid NOT NULL,
    kind                 operation_kind NOT NULL,
    operation_id         operation_id NOT NULL,    -- the provider's idempotency key
    amount_minor         positive_minor_units NOT NULL,
    currency             currency_code NOT NULL,   -- the payment's
    provider             provider_name NOT NULL,   -- the payment's
    reason               refund_reason,
    merchant_reference   merchant_reference,       -- unique per tenant and kind when given
    metadata             jsonb NOT NULL DEFAULT '{}',
    state                payment_state NOT NULL DEFAULT 'pending',
    generation           bigint NOT NULL DEFAULT 0,
    lease_owner          text,
    lease_expires_at     timestamptz,
    next_attempt_at      timestamptz,
    attempt_count        integer NOT NULL DEFAULT 0,
    provider_reference   text,                     -- the provider's ID of this operation
    review_reason        text,
    review_code          review_code,
    failure_reason       text,                     -- the provider's reason, when it failed
    lookup_count         integer NOT NULL DEFAULT 0,
    lookup_failures      integer NOT NULL DEFAULT 0,
    resend_count         integer NOT NULL DEFAULT 0,
    first_attempt_at     timestamptz,
    last_attempt_at      timestamptz,
    created_by           uuid NOT NULL,
    idempotency_key_hash sha256_digest,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, payment_id) REFERENCES payments (tenant_id, payment_id),
    FOREIGN KEY (tenant_id, created_by) REFERENCES principals (tenant_id, principal_id),
    CHECK ((state = 'processing') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (review_code IS NULL OR state = 'needs_review'),
    CHECK (octet_length(failure_reason) <= 1000)
);
COMMENT ON TABLE operations IS
    'a payment''s money movements beyond its charge (refunds), each under the charge''s protocol';

CREATE UNIQUE INDEX operations_operation_id ON operations (operation_id);
CREATE UNIQUE INDEX operations_merchant_reference ON operations (tenant_id, kind, merchant_reference)
    WHERE merchant_reference IS NOT NULL;
CREATE INDEX operations_of_payment ON operations (tenant_id, payment_id, created_at);
CREATE INDEX operations_due ON operations (coalesce(next_attempt_at, created_at))
    WHERE state IN ('pending', 'retry_scheduled');
CREATE INDEX operations_state_created ON operations (state, created_at);
