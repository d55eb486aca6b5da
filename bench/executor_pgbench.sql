-- The SQL the executor runs for one payment with --batch 1, as pgbench runs it: the claim
-- transaction (FOR UPDATE SKIP LOCKED, lease, generation + 1, attempt opened), then the pre-call
-- fence (the claim proved still current and its lease renewed, immediately before the provider
-- call: store::renew_claims), then the settle
-- transaction (attempt finished, payment succeeded fenced by generation, outbox event). No provider
-- call in between: this is the database's own limit. Claims only provider 'pgbench' rows, which
-- bench/executor inserts for it. A client that finds nothing to claim aborts (\gset wants a row).
BEGIN;
WITH due AS (
    SELECT tenant_id, payment_id
      FROM payments
     WHERE (state = 'pending' OR (state = 'retry_scheduled' AND next_attempt_at <= now()))
       AND provider = ANY('{pgbench}'::text[])
     ORDER BY coalesce(next_attempt_at, created_at)
     LIMIT 1
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE payments p
       SET state = 'processing', generation = p.generation + 1, lease_owner = 'pgbench',
           lease_expires_at = now() + make_interval(secs => 20000::double precision / 1000),
           attempt_count = p.attempt_count + 1, next_attempt_at = NULL, updated_at = now(),
           first_attempt_at = coalesce(p.first_attempt_at, now()), last_attempt_at = now()
      FROM due
     WHERE p.tenant_id = due.tenant_id AND p.payment_id = due.payment_id
 RETURNING p.*
), attempt AS (
    INSERT INTO payment_attempts (tenant_id, payment_id, attempt_no, generation, worker,
                                  operation_id, started_at)
    SELECT tenant_id, payment_id, attempt_count, generation, 'pgbench', operation_id, now() FROM claimed
)
SELECT p.tenant_id::text AS t, p.payment_id::text AS p, p.generation AS g, p.attempt_count AS a,
       p.operation_id, p.merchant_reference, p.amount_minor, p.currency, p.provider, p.payment_method,
       p.customer, p.description, p.metadata::text, (extract(epoch FROM p.created_at) * 1000000)::bigint
  FROM claimed p \gset
END;
UPDATE payments p
   SET lease_expires_at = clock_timestamp() + make_interval(secs => 20000::double precision / 1000)
  FROM unnest(ARRAY[:t::uuid], ARRAY[:p::uuid], ARRAY[:g::bigint]) AS c(tenant_id, payment_id, generation)
 WHERE p.tenant_id = c.tenant_id AND p.payment_id = c.payment_id AND p.generation = c.generation
   AND p.state = 'processing' AND p.lease_owner = 'pgbench' AND p.lease_expires_at > clock_timestamp()
RETURNING p.payment_id::text,
          floor(extract(epoch FROM p.lease_expires_at - clock_timestamp()) * 1000)::bigint;
BEGIN;
UPDATE payment_attempts
   SET finished_at = now(), outcome = 'succeeded', http_status = 200, error_class = nullif('', ''),
       provider_reference = 'pi_pgbench', detail = left('', 4096)
 WHERE tenant_id = :t::uuid AND payment_id = :p::uuid AND attempt_no = :a;
WITH settled AS (
    UPDATE payments
       SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL,
           next_attempt_at = NULL, provider_reference = coalesce('pi_pgbench', provider_reference),
           review_reason = NULL, review_code = NULL, lookup_count = 0, lookup_failures = 0,
           updated_at = now()
     WHERE tenant_id = :t::uuid AND payment_id = :p::uuid AND generation = :g
       AND state = 'processing'
 RETURNING tenant_id, payment_id, operation_id, amount_minor, currency, merchant_reference,
           provider, provider_reference, state, generation
), event AS (
    INSERT INTO outbox (tenant_id, aggregate_type, aggregate_id, event_type, payload)
    SELECT tenant_id, 'payment', payment_id, 'payment.' || state,
           jsonb_build_object('payment_id', payment_id, 'tenant_id', tenant_id,
                              'operation_id', operation_id, 'state', state,
                              'amount', amount_minor, 'currency', currency,
                              'merchant_reference', merchant_reference, 'provider', provider,
                              'provider_reference', provider_reference, 'generation', generation,
                              'reason', NULL::text)
      FROM settled
)
SELECT count(*) FROM settled;
END;
