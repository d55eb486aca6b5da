-- bench/intake's lean baseline: tables of the bench's own, in a schema of its own, holding the
-- same columns as payrecon's intake tables (LIKE ... INCLUDING DEFAULTS IDENTITY) but only the keys
-- and unique constraints intake needs: the idempotency key, the payment's key and its business
-- identities (merchant reference per tenant, operation ID), the outbox event's key. No other
-- index, no foreign key, no CHECK. IDs are time-ordered (UUIDv7 layout), so every key that can
-- grow at its B-tree's right edge does. Created after `payrecon db migrate`; dropped with the
-- bench's throwaway database.
DROP SCHEMA IF EXISTS lean CASCADE;
CREATE SCHEMA lean;

-- 48-bit Unix milliseconds, version 7, variant 10, the rest random (from a v4 UUID).
CREATE FUNCTION lean.uuid_v7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
               substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
               FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;
CREATE SEQUENCE lean.n;

CREATE TABLE lean.idempotency_records (LIKE public.idempotency_records INCLUDING DEFAULTS,
    PRIMARY KEY (tenant_id, principal_id, operation, idempotency_key));
CREATE TABLE lean.payments (LIKE public.payments INCLUDING DEFAULTS,
    PRIMARY KEY (tenant_id, payment_id),
    UNIQUE (tenant_id, merchant_reference),
    UNIQUE (operation_id));
CREATE TABLE lean.outbox (LIKE public.outbox INCLUDING DEFAULTS INCLUDING IDENTITY,
    PRIMARY KEY (tenant_id, event_id));
ALTER TABLE lean.outbox ALTER COLUMN event_id SET DEFAULT lean.uuid_v7();

-- LIKE copies a column's type, and schema 14 made many of payrecon's CHECKs domains: the lean
-- tables take each domain's base type instead, so that they hold no CHECK at all (what the domains
-- cost is measured against them, bench/README.md). bench/intake_ladder_schema.sql does the same to
-- one of its rungs.
CREATE FUNCTION lean.use_base_types(nsp text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE col record;
BEGIN
    FOR col IN
        SELECT c.relname, a.attname, format_type(t.typbasetype, t.typtypmod) AS base
          FROM pg_attribute a
          JOIN pg_class c ON c.oid = a.attrelid AND c.relkind = 'r'
          JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = nsp
          JOIN pg_type t ON t.oid = a.atttypid AND t.typtype = 'd'
         WHERE a.attnum > 0 AND NOT a.attisdropped
    LOOP
        EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I TYPE %s', nsp, col.relname, col.attname,
                       col.base);
    END LOOP;
END $$;
SELECT lean.use_base_types('lean');
