-- The lean baseline of bench/intake: the same logical writes as one fresh intake request (claim
-- the key, insert the payment with its business unique constraints and its outbox event, store the
-- response) on the tables of bench/intake_lean_schema.sql (only the keys intake needs). Written by
-- hand, not from the store's statements (its tables are the bench's own), in four statements: one
-- more round trip than the intake makes, so serve's ratio against it errs low, never high. Keys come from a sequence, like
-- wrk's per-thread counters: they grow at the right edge. Variables: tenant, principal (-D).
BEGIN;
INSERT INTO lean.idempotency_records (tenant_id, principal_id, operation, idempotency_key, request_hash, expires_at)
  VALUES (:tenant::uuid, :principal::uuid, 'create_payment', 'lean-' || nextval('lean.n'),
          decode(md5(random()::text) || md5(random()::text), 'hex'), now() + interval '7 days')
  ON CONFLICT DO NOTHING
  RETURNING created_at, idempotency_key AS k, lean.uuid_v7() AS id \gset
INSERT INTO lean.payments (tenant_id, payment_id, merchant_reference, amount_minor, currency, provider,
                           payment_method, customer, metadata, operation_id, state, created_by,
                           idempotency_key_hash)
  VALUES (:tenant::uuid, :id::uuid, :k, 1999, 'EUR', 'stripe', 'pm_card_visa',
          'cus_bench', '{"bench": "pgbench"}', 'pr_' || replace(:id, '-', ''), 'pending', :principal::uuid,
          decode(md5(:k) || md5(:id), 'hex'))
  ON CONFLICT (tenant_id, merchant_reference) DO NOTHING;
INSERT INTO lean.outbox (tenant_id, aggregate_type, aggregate_id, event_type, payload)
  VALUES (:tenant::uuid, 'payment', :id::uuid, 'payment.created',
          '{"payment_id": "x", "state": "pending", "amount": 1999, "currency": "EUR"}');
UPDATE lean.idempotency_records
   SET response_status = 202,
       response_body = '{"id":"00000000-0000-0000-0000-000000000000","object":"payment","status":"pending","status_category":"in_flight","amount":1999,"currency":"EUR","merchant_reference":"pgb","provider":"stripe","created_at":"2026-12-02T10:00:00.000Z"}',
       resource_type = 'payment', resource_id = :id::uuid
 WHERE tenant_id = :tenant::uuid AND principal_id = :principal::uuid
   AND operation = 'create_payment' AND idempotency_key = :k;
END;
