-- The lean baseline of bench/intake (issue 33): the same logical writes as one fresh intake request
-- -- the key claimed with its stored 202 and the resource it names, the payment under its business
-- unique constraints, its outbox event -- in ONE autocommit statement, as intake makes them
-- (store/intake_store.cpp, intake_once), on the tables of bench/intake_lean_schema.sql (payrecon's
-- columns, only the keys intake needs). What it leaves out is what payrecon's statement adds beyond
-- the writes themselves: the principal's revocation check, the reference-taken check, the event's
-- payload built from the row, the stored body's time spliced in. Written by hand, not from the
-- store's statements (its tables are the bench's own). Keys come from a sequence, like wrk's
-- per-thread counters: they grow at the right edge. Variables: tenant, principal (-D).
WITH c AS (
    INSERT INTO lean.idempotency_records
        (tenant_id, principal_id, operation, idempotency_key, request_hash, expires_at,
         response_status, response_body, resource_type, resource_id)
    VALUES (:tenant::uuid, :principal::uuid, 'create_payment', 'lean-' || nextval('lean.n'),
            decode(md5(random()::text) || md5(random()::text), 'hex'), now() + interval '7 days',
            202, '{"id":"00000000-0000-0000-0000-000000000000","object":"payment","status":"pending","status_category":"in_flight","amount":1999,"currency":"EUR","merchant_reference":"pgb","provider":"stripe","created_at":"2026-12-02T10:00:00.000Z"}',
            'payment', lean.uuid_v7())
    ON CONFLICT DO NOTHING
    RETURNING idempotency_key, resource_id
), p AS (
    INSERT INTO lean.payments (tenant_id, payment_id, merchant_reference, amount_minor, currency,
                               provider, payment_method, customer, metadata, operation_id, state,
                               created_by, idempotency_key_hash)
    SELECT :tenant::uuid, c.resource_id, c.idempotency_key, 1999, 'EUR', 'stripe', 'pm_card_visa',
           'cus_bench', '{"bench": "pgbench"}', 'pr_' || replace(c.resource_id::text, '-', ''),
           'pending', :principal::uuid, decode(md5(c.idempotency_key) || md5(c.resource_id::text), 'hex')
      FROM c
    ON CONFLICT (tenant_id, merchant_reference) DO NOTHING
    RETURNING payment_id
), o AS (
    INSERT INTO lean.outbox (tenant_id, aggregate_type, aggregate_id, event_type, payload)
    SELECT :tenant::uuid, 'payment', p.payment_id, 'payment.created',
           '{"payment_id": "x", "state": "pending", "amount": 1999, "currency": "EUR"}'
      FROM p
)
SELECT c.resource_id FROM c;
