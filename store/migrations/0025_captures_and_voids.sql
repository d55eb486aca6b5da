-- Captures and voids (issue 32, DESIGN section 16): a payment made with capture "manual" is only
-- authorised by its charge; its captures take (part of) what was authorised, and a void releases
-- what is left. Both are operations of the payment, under the charge's protocol like refunds.
ALTER DOMAIN operation_kind DROP CONSTRAINT operation_kind_check;
ALTER DOMAIN operation_kind ADD CONSTRAINT operation_kind_check
    CHECK (VALUE IN ('refund', 'capture', 'void'));

CREATE DOMAIN capture_method AS text CHECK (VALUE IN ('automatic', 'manual'));

-- The amount rules, held in the database under concurrency as refunds' are: what the payment's
-- captures that succeeded, are in flight, unknown or in review add up to (capture_held_minor),
-- what those that succeeded captured (captured_minor), whether a final capture is held (nothing
-- may be captured or voided after it), whether a void is held (nothing may be captured after it).
-- Each is taken only by the UPDATE that raises it, whose WHERE PostgreSQL re-reads on the row's
-- newest version after waiting for another writer; an operation that fails gives back what it
-- held in the statement that fails it. authorization_expires_at is the earliest the provider may
-- let the authorisation lapse (its validity counted from acceptance): no capture from then on.
ALTER TABLE payments
    ADD COLUMN capture_method capture_method NOT NULL DEFAULT 'automatic',
    ADD COLUMN authorization_expires_at timestamptz,
    ADD COLUMN capture_held_minor bigint NOT NULL DEFAULT 0,
    ADD COLUMN captured_minor bigint NOT NULL DEFAULT 0,
    ADD COLUMN final_capture_held boolean NOT NULL DEFAULT false,
    ADD COLUMN void_held boolean NOT NULL DEFAULT false,
    ADD COLUMN voided_at timestamptz,
    ADD COLUMN authorization_expired_at timestamptz;

ALTER TABLE payments ADD CONSTRAINT payments_captures_within_authorisation
    CHECK (captured_minor >= 0 AND captured_minor <= capture_held_minor
           AND capture_held_minor <= amount_minor);
ALTER TABLE payments ADD CONSTRAINT payments_captures_of_manual_only
    CHECK (capture_method = 'manual'
           OR (capture_held_minor = 0 AND NOT final_capture_held AND NOT void_held
               AND authorization_expires_at IS NULL));
ALTER TABLE payments ADD CONSTRAINT payments_no_void_and_final_capture
    CHECK (NOT (void_held AND final_capture_held));

-- Refunds of what was captured: an authorisation's charge refunds nothing until captured.
ALTER TABLE payments DROP CONSTRAINT payments_refunds_within_charge;
ALTER TABLE payments ADD CONSTRAINT payments_refunds_within_charge
    CHECK (refund_held_minor >= 0
           AND refund_held_minor <= CASE WHEN capture_method = 'manual' THEN captured_minor
                                         ELSE coalesce(charged_amount_minor, amount_minor) END);

-- A capture's: the last of its authorisation's (the provider releases the rest).
ALTER TABLE operations ADD COLUMN final boolean;
ALTER TABLE operations ADD CONSTRAINT operations_final_of_captures
    CHECK ((kind = 'capture') = (final IS NOT NULL));

COMMENT ON TABLE operations IS
    'a payment''s money movements beyond its charge (refunds, captures, voids), each under the '
    'charge''s protocol';
