-- One provider's statement, seeded set-based: :n payments of ours (a multiple of 10000) and :n
-- provider records in a run already listed, for the window [:from, :from + 1 day) with a margin of
-- 1 h. Used by bench/statement (psql -v) and tests/execution/test_statement_memory.cpp (which
-- substitutes the same variables). Variables: provider, tenant, principal (uuids), n, from (unix
-- seconds).
--
-- Payment i has operation ID pr_<md5 of i>, shaped like the IDs payrecon gives (pr_ and 32 random
-- hex digits): neither side is stored in key order, as in production, where rows lie in time order.
-- It is first attempted at :from + i % 86400. Per 10000
-- payments, by i % 10000 (every other i is matched; one in 100 of them failed here and was declined
-- there, which is matched too: no charge on either side):
--   1, 7  missing_remote      the provider has no record
--   2     amount_mismatch     the provider charged 1 minor unit more
--   3     currency_mismatch   the provider charged USD
--   4     status_mismatch     ours failed, and the provider charged it
--   5     unresolved_unknown  ours is still unknown
--   6     duplicate_remote    the provider holds a second charge
--   8     missing_local       and the provider holds a charge keyed pr_<md5 of i>z that we never made
-- so the provider's side holds exactly :n records too.

INSERT INTO recon_runs (provider, window_from, window_to, margin_s, status, pages)
VALUES (:'provider', to_timestamp(:from), to_timestamp(:from + 86400), 3600, 'listed', 1);

INSERT INTO payments (tenant_id, payment_id, merchant_reference, amount_minor, currency, provider,
                      payment_method, operation_id, state, attempt_count, provider_reference,
                      first_attempt_at, last_attempt_at, created_by, created_at, updated_at)
SELECT :'tenant'::uuid, md5(:'provider' || '/' || i)::uuid, 'statement-' || i, 1000 + i % 1000, 'EUR',
       :'provider', 'pm_card_visa', 'pr_' || md5(i::text),
       CASE WHEN i % 10000 = 5 THEN 'unknown' WHEN i % 10000 = 4 OR i % 100 = 50 THEN 'failed'
            ELSE 'succeeded' END, 1,
       CASE WHEN i % 10000 = 5 OR i % 100 = 50 THEN NULL ELSE 'pi_' || i END,
       to_timestamp(:from + i % 86400), to_timestamp(:from + i % 86400), :'principal'::uuid,
       to_timestamp(:from + i % 86400), to_timestamp(:from + i % 86400)
  FROM generate_series(1, :n) AS i;

INSERT INTO statement_records (run_id, provider_reference, match_key, operation_id, amount_minor,
                               currency, status, raw_status, created_at)
SELECT r.run_id, s.reference, s.key, s.key, s.amount, s.currency, s.status, s.raw_status,
       to_timestamp(:from + s.i % 86400 + 1)
  FROM recon_runs r,
       (SELECT i, 'pi_' || i AS reference, 'pr_' || md5(i::text) AS key,
               1000 + i % 1000 + CASE WHEN i % 10000 = 2 THEN 1 ELSE 0 END AS amount,
               CASE WHEN i % 10000 = 3 THEN 'USD' ELSE 'EUR' END AS currency,
               CASE WHEN i % 100 = 50 THEN 'declined' ELSE 'succeeded' END AS status,
               CASE WHEN i % 100 = 50 THEN 'requires_payment_method' ELSE 'succeeded' END AS raw_status
          FROM generate_series(1, :n) AS i
         WHERE i % 10000 NOT IN (1, 7)
        UNION ALL
        SELECT i, 'pi_' || i || '_2', 'pr_' || md5(i::text), 1000 + i % 1000, 'EUR',
               'succeeded', 'succeeded'
          FROM generate_series(6, :n, 10000) AS i
        UNION ALL
        SELECT i, 'pi_' || i || '_orphan', 'pr_' || md5(i::text) || 'z', 4200, 'EUR',
               'succeeded', 'succeeded'
          FROM generate_series(8, :n, 10000) AS i) AS s
 WHERE r.provider = :'provider';

UPDATE recon_runs
   SET remote_records = (SELECT count(*) FROM statement_records WHERE run_id = recon_runs.run_id)
 WHERE provider = :'provider';

-- As autovacuum would have by the time a nightly run reads them.
ANALYZE payments;
ANALYZE statement_records;
