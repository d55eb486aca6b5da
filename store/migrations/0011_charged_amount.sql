-- What the provider really charged, when an operator recorded that it differs from what was asked
-- (`payrecon review resolve --as succeeded --amount`, checked with the provider where it can be
-- asked): a remote_mismatch settled as "the customer paid this" no longer comes back every night
-- as the statement's amount_mismatch. NULL: the provider charged amount_minor. The currency is the
-- payment's. Nullable without a default: adding it rewrites no row.
ALTER TABLE payments ADD COLUMN charged_amount_minor bigint
    CHECK (charged_amount_minor IS NULL OR charged_amount_minor >= 0);
