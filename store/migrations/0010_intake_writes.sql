-- Intake writes what some query needs, and grows its indexes at their right edge (issue 14).
--
-- Each index costs every INSERT of a payment and every UPDATE that changes an indexed column (a
-- state change: claim, settle, reconcile, resolve): an entry in each whose predicate the row meets.
-- Before this migration a fresh payment wrote 12 index entries across payments (8 of its 11
-- indexes), idempotency_records (2) and outbox (2); after it, 9. Every index left on these tables
-- is listed below with the queries that need it, and carries that as its COMMENT (\di+ shows it).
-- The plans were checked with EXPLAIN over 200,000 payments (tests/store/test_schema.cpp keeps
-- checking that these queries use an index).

-- Time-ordered IDs: 48 bits of Unix milliseconds, version 7, variant 10, the rest random (from a
-- version 4 UUID), the layout of RFC 9562. PostgreSQL 15 has none. Payment IDs and operation IDs
-- are made in C++ (core/uuid); this makes the outbox's event IDs, which are made in SQL. IDs already
-- stored keep their value: a key's order only decides where new entries go.
CREATE FUNCTION uuid_generate_v7() RETURNS uuid LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
               substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
               FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;
ALTER TABLE outbox ALTER COLUMN event_id SET DEFAULT uuid_generate_v7();

-- payments: what goes.
-- Operators name a payment by its ID alone (review show/resolve, payments show): the primary key
-- (tenant_id, payment_id) serves that through the small tenants table, one probe per tenant
-- (inspect_store's inspect_ref_by_payment_id).
DROP INDEX payments_payment_id;
-- Three partial indexes on overlapping state sets, each replaced by one that stays:
--   payments_claimable (state, next_attempt_at) WHERE state IN (pending, retry_scheduled,
--   processing, unknown): the claim reads payments_due; lease expiry (state = 'processing') and the
--   reconciler (state = 'unknown' ORDER BY created_at) read payments_state_created;
--   payments_unknown_due (provider, next_attempt_at) WHERE state = 'unknown': the reconciler, in
--   payments_state_created's order (created_at), which is the order its query asks for;
--   payments_in_review (provider, updated_at) WHERE state = 'needs_review': the review list, which
--   payments_state_created finds by state (the queue is sorted by updated_at, a small sort).
DROP INDEX payments_claimable;
DROP INDEX payments_unknown_due;
DROP INDEX payments_in_review;
-- A payment's tenant exists because its principal does: (tenant_id, created_by) references
-- principals, whose tenant_id references tenants. The second check took a lookup and a row lock
-- on the tenant's row per payment (FOR KEY SHARE: a new MultiXact whenever another intake holds it).
ALTER TABLE payments DROP CONSTRAINT payments_tenant_id_fkey;

-- outbox: the relay that would read unpublished events in seq order is not built (DESIGN section
-- 15); every event paid an entry here for a reader that does not exist. The relay's migration adds
-- the index it needs.
DROP INDEX outbox_unpublished;

-- CHECKs with a bounded repetition ({1,255}) make PostgreSQL's regex engine walk a state per
-- repetition: the key's check took 37 us a row, the operation ID's 9 us, the operation's 6 us,
-- against under 1 us for the same rule as "one or more, and a length" -- and every INSERT and every
-- UPDATE of the row checks them again (intake's response update, each claim, fence and settle).
-- Each rule below allows exactly what it did (every allowed character is one byte); ADD CONSTRAINT
-- checks the existing rows against it.
ALTER TABLE idempotency_records
    DROP CONSTRAINT idempotency_records_idempotency_key_check,
    ADD CONSTRAINT idempotency_records_idempotency_key_check
        CHECK (idempotency_key ~ '^[\x21-\x7e]+$' AND octet_length(idempotency_key) <= 255),
    DROP CONSTRAINT idempotency_records_operation_check,
    ADD CONSTRAINT idempotency_records_operation_check
        CHECK (operation ~ '^[a-z_]+$' AND octet_length(operation) <= 64);
ALTER TABLE payments
    DROP CONSTRAINT payments_operation_id_check,
    ADD CONSTRAINT payments_operation_id_check
        CHECK (operation_id ~ '^[\x21-\x7e]+$' AND octet_length(operation_id) <= 45),
    DROP CONSTRAINT payments_provider_check,
    ADD CONSTRAINT payments_provider_check
        CHECK (provider ~ '^[a-z0-9_-]+$' AND octet_length(provider) <= 32);

-- What stays, and who needs it.
COMMENT ON INDEX payments_pkey IS
    'a payment by (tenant, ID): intake, claims, settle, renew, reconcile, resolve, inspect, purge; by ID alone through tenants (inspect_ref_by_payment_id); the foreign keys of payment_attempts and payment_lookups';
COMMENT ON INDEX payments_tenant_id_merchant_reference_key IS
    'UNIQUE (tenant_id, merchant_reference): the business identity; intake''s ON CONFLICT and intake_reference_holder';
COMMENT ON INDEX payments_operation_id IS
    'UNIQUE (operation_id): the provider''s idempotency key, never shared; inspect_ref_by_operation_id, the statement''s details of unmatched keys (provider = $1 AND operation_id = ANY)';
COMMENT ON INDEX payments_due IS
    'executor_claim: pending and due retry_scheduled payments in coalesce(next_attempt_at, created_at) order, LIMIT n FOR UPDATE SKIP LOCKED';
COMMENT ON INDEX payments_state_created IS
    'a state''s payments in created_at order: reconcile_claim and reconcile_peek (unknown), executor_expire (processing), inspect_list_by_created and the review list (a state), reconcile_queue_counts (the open states)';
COMMENT ON INDEX payments_statement IS
    'the statement''s local side: one provider''s payments anchored (first attempt, else acceptance) in a window';
COMMENT ON INDEX payments_provider_reference IS
    'statement_pair_by_reference: provider records without our operation ID, paired by the provider''s reference';
COMMENT ON INDEX idempotency_records_pkey IS
    'the idempotency key: intake''s claim (ON CONFLICT), its response update and its replay read; purge''s deletes';
COMMENT ON INDEX idempotency_records_expires_at IS
    'payrecon purge by expiry (expires_at <= now())';
COMMENT ON INDEX outbox_pkey IS
    'an event by (tenant, event ID): the stable ID a relay delivers it under';
