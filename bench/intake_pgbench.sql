-- The SQL of one fresh intake request, as pgbench runs it on payrecon's tables: claim the key,
-- insert the payment and its outbox event, store the response. Variables: tenant, principal (set
-- with -D). The payment's ID and operation ID are time-ordered, as core/uuid makes them for serve
-- (here from migration 0010's uuid_generate_v7()); keys and merchant references are random.
\set n random(1, 9000000000000000)
BEGIN;
INSERT INTO idempotency_records (tenant_id, principal_id, operation, idempotency_key, request_hash, expires_at)
  VALUES (:tenant::uuid, :principal::uuid, 'create_payment', 'pgb-' || :n,
          decode(md5(:n::text) || md5(:n::text), 'hex'), now() + interval '7 days')
  ON CONFLICT DO NOTHING RETURNING created_at, uuid_generate_v7() AS id \gset
INSERT INTO payments (tenant_id, payment_id, merchant_reference, amount_minor, currency, provider,
                      payment_method, customer, metadata, operation_id, state, created_by,
                      idempotency_key_hash)
  VALUES (:tenant::uuid, :id::uuid, 'pgb-' || :n, 1999, 'EUR', 'stripe', 'pm_card_visa',
          'cus_bench', '{"bench": "pgbench"}', 'pr_' || replace(:id, '-', ''), 'pending', :principal::uuid,
          decode(md5('k' || :n::text) || md5(:n::text), 'hex'))
  ON CONFLICT (tenant_id, merchant_reference) DO NOTHING;
INSERT INTO outbox (tenant_id, aggregate_type, aggregate_id, event_type, payload)
  VALUES (:tenant::uuid, 'payment', :id::uuid, 'payment.created',
          '{"payment_id": "x", "state": "pending", "amount": 1999, "currency": "EUR"}');
UPDATE idempotency_records
   SET response_status = 202,
       response_body = '{"id":"00000000-0000-0000-0000-000000000000","object":"payment","status":"pending","status_category":"in_flight","amount":1999,"currency":"EUR","merchant_reference":"pgb","provider":"stripe","created_at":"2026-12-02T10:00:00.000Z"}',
       resource_type = 'payment', resource_id = :id::uuid
 WHERE tenant_id = :tenant::uuid AND principal_id = :principal::uuid
   AND operation = 'create_payment' AND idempotency_key = 'pgb-' || :n;
END;
