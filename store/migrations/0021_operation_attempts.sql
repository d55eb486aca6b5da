-- Refunds on the executor and the reconciler (issue 31): every attempt and every status query
-- belongs to one operation -- the charge (its payment's own operation ID) or one of the payment's
-- operations (a refund's). A payment's attempts are numbered per operation: the charge's attempt
-- 1 and a refund's attempt 1 are two rows.
ALTER TABLE payment_attempts DROP CONSTRAINT payment_attempts_pkey;
ALTER TABLE payment_attempts ADD PRIMARY KEY (tenant_id, payment_id, operation_id, attempt_no);
COMMENT ON TABLE payment_attempts IS
    'every provider call of a payment''s operations (the charge, each refund), by operation';

ALTER TABLE payment_lookups ADD COLUMN operation_id operation_id;
UPDATE payment_lookups l SET operation_id = p.operation_id
  FROM payments p WHERE p.tenant_id = l.tenant_id AND p.payment_id = l.payment_id;
ALTER TABLE payment_lookups ALTER COLUMN operation_id SET NOT NULL;
COMMENT ON COLUMN payment_lookups.operation_id IS
    'the operation asked about: the payment''s own (its charge) or one of its refunds''';

-- The reconciler's and operators' queues of operations read operations_state_created, as the
-- payments' read payments_state_created (0010): no index of their own.
