-- bench/intake_ladder's tables (issue 33): one schema per rung, rung0 ... rung8, each holding copies
-- of the three tables intake writes (idempotency_records, payments, outbox), so that intake's
-- unqualified statement, run with search_path=rungN,public, writes that rung's copies while
-- `principals`, the functions and the domains stay payrecon's own (public). Each rung's tables are
-- made from the rung above's, one thing removed:
--   rung0, rung1  payrecon's tables as they are: every column, default, index, CHECK, domain and
--                 foreign key, if one comes back (rung1 differs from rung0 only in the statement's
--                 keys). Schema 28 dropped the foreign keys to tenants and principals, which were
--                 the ladder's rung 2 before (their cost: bench/README.md)
--   rung2         without the indexes beyond the keys bench/intake's lean tables keep (the
--                 idempotency key, the payment's key, UNIQUE (tenant_id, merchant_reference),
--                 UNIQUE (operation_id), the outbox event's key), and without foreign keys
--   rung3         also every domain replaced by its base type (the table CHECKs kept)
--   rung4         also without the table CHECKs: the lean tables (bench/intake_lean_schema.sql)
--   rung5-8       rung4's tables again (only the statement changes)
-- and checked against what it is meant to be at the end (ladder.shape): a rung that drifted from
-- payrecon's schema or from the lean one fails here. Run after `payrecon db migrate` and
-- bench/intake_lean_schema.sql; dropped with the bench's throwaway database.
DO $$
DECLARE n int;
BEGIN
    FOR n IN 0..8 LOOP
        EXECUTE format('DROP SCHEMA IF EXISTS rung%s CASCADE', n);
        EXECUTE format('CREATE SCHEMA rung%s', n);
    END LOOP;
END $$;
DROP SCHEMA IF EXISTS ladder CASCADE;
CREATE SCHEMA ladder;

-- rung0, rung1: LIKE ... INCLUDING ALL copies columns, defaults, identity, CHECKs, indexes and
-- comments, never foreign keys; they get payrecon's foreign keys back, if it has any, still
-- referencing public's tables.
DO $$
DECLARE
    n int;
    t text;
    fk record;
BEGIN
    PERFORM set_config('search_path', 'pg_catalog', true); -- constraint definitions qualified
    FOR n IN 0..1 LOOP
        FOREACH t IN ARRAY ARRAY['idempotency_records', 'payments', 'outbox'] LOOP
            EXECUTE format('CREATE TABLE rung%s.%I (LIKE public.%I INCLUDING ALL)', n, t, t);
            FOR fk IN
                SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
                 WHERE conrelid = format('public.%I', t)::regclass AND contype = 'f'
            LOOP
                EXECUTE format('ALTER TABLE rung%s.%I ADD CONSTRAINT %I %s', n, t, fk.conname,
                               fk.def);
            END LOOP;
        END LOOP;
    END LOOP;
END $$;

-- rung2: rung1's columns, defaults, identity and CHECKs with only the lean tables' keys (LIKE copies
-- no foreign key).
CREATE TABLE rung2.idempotency_records (LIKE rung1.idempotency_records
    INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS,
    PRIMARY KEY (tenant_id, principal_id, operation, idempotency_key));
CREATE TABLE rung2.payments (LIKE rung1.payments
    INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS,
    PRIMARY KEY (tenant_id, payment_id),
    UNIQUE (tenant_id, merchant_reference),
    UNIQUE (operation_id));
CREATE TABLE rung2.outbox (LIKE rung1.outbox
    INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS,
    PRIMARY KEY (tenant_id, event_id));

-- rung3: rung2 with each domain replaced by its base type.
CREATE TABLE rung3.idempotency_records (LIKE rung2.idempotency_records INCLUDING ALL);
CREATE TABLE rung3.payments (LIKE rung2.payments INCLUDING ALL);
CREATE TABLE rung3.outbox (LIKE rung2.outbox INCLUDING ALL);
SELECT lean.use_base_types('rung3'); -- bench/intake_lean_schema.sql

-- rung3 ... rung7: rung3 without its CHECKs (INCLUDING INDEXES brings the keys, no CHECK).
DO $$
DECLARE
    n int;
    t text;
BEGIN
    FOR n IN 4..8 LOOP
        FOREACH t IN ARRAY ARRAY['idempotency_records', 'payments', 'outbox'] LOOP
            EXECUTE format('CREATE TABLE rung%s.%I (LIKE rung3.%I INCLUDING DEFAULTS '
                           'INCLUDING IDENTITY INCLUDING INDEXES)', n, t, t);
        END LOOP;
    END LOOP;
END $$;

-- What a schema's three intake tables are, one row per column (type -- a domain's base type if
-- as_base --, default, NOT NULL, identity), index (without its name), CHECK and foreign key: what
-- the rungs are compared by.
CREATE FUNCTION ladder.shape(nsp text, as_base boolean DEFAULT false)
RETURNS TABLE (tbl text, kind text, def text)
LANGUAGE sql STABLE SET search_path = pg_catalog AS $$
    SELECT c.relname::text, 'column',
           a.attname || ' '
           || CASE WHEN as_base AND t.typtype = 'd' THEN format_type(t.typbasetype, t.typtypmod)
                   ELSE format_type(a.atttypid, a.atttypmod) END
           || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
           || coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '')
           || CASE WHEN a.attidentity <> '' THEN ' IDENTITY ' || a.attidentity::text ELSE '' END
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = nsp
      JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      JOIN pg_type t ON t.oid = a.atttypid
      LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
     WHERE c.relname IN ('idempotency_records', 'payments', 'outbox') AND c.relkind = 'r'
    UNION ALL
    SELECT c.relname::text, 'index',
           CASE WHEN i.indisprimary THEN 'PRIMARY KEY ' WHEN i.indisunique THEN 'UNIQUE ' ELSE '' END
           || regexp_replace(pg_get_indexdef(i.indexrelid), '^.* USING ', 'USING ')
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = nsp
      JOIN pg_index i ON i.indrelid = c.oid
     WHERE c.relname IN ('idempotency_records', 'payments', 'outbox') AND c.relkind = 'r'
    UNION ALL
    SELECT c.relname::text, CASE k.contype WHEN 'c' THEN 'check' ELSE 'foreign key' END,
           pg_get_constraintdef(k.oid)
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = nsp
      JOIN pg_constraint k ON k.conrelid = c.oid AND k.contype IN ('c', 'f')
     WHERE c.relname IN ('idempotency_records', 'payments', 'outbox') AND c.relkind = 'r'
$$;

-- The rows of `a` that `b` lacks, and of `b` that `a` lacks, as "-" and "+" lines; empty if equal.
-- (a's domains as their base types if as_base.)
CREATE FUNCTION ladder.diff(a text, b text, as_base boolean DEFAULT false) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce(string_agg(line, E'\n' ORDER BY line), '') FROM (
        (SELECT '- ' || tbl || ' ' || kind || ': ' || def AS line FROM ladder.shape(a, as_base)
         EXCEPT ALL SELECT '- ' || tbl || ' ' || kind || ': ' || def FROM ladder.shape(b))
        UNION ALL
        (SELECT '+ ' || tbl || ' ' || kind || ': ' || def FROM ladder.shape(b)
         EXCEPT ALL SELECT '+ ' || tbl || ' ' || kind || ': ' || def FROM ladder.shape(a, as_base))) d
$$;

-- Each rung is what it claims: the rung above with exactly the one thing removed.
DO $$
DECLARE
    got text;
    expected text;
    n int;
BEGIN
    FOR n IN 0..1 LOOP
        got := ladder.diff('public', 'rung' || n);
        IF got <> '' THEN
            RAISE EXCEPTION 'rung%''s tables are not payrecon''s:%', n, E'\n' || got;
        END IF;
    END LOOP;
    -- rung2: only indexes removed (and foreign keys, should payrecon have any again: then this
    -- fails, the ladder's rung for them having gone with schema 28), and what is left are the
    -- lean tables' keys.
    got := ladder.diff('rung1', 'rung2');
    IF got !~ '^- ' OR got ~ E'(^|\n)(\\+|- \\S+ (column|check|foreign key))' THEN
        RAISE EXCEPTION 'rung2 is not rung1 without indexes:%', E'\n' || got;
    END IF;
    got := (SELECT string_agg(tbl || ' ' || def, E'\n' ORDER BY tbl, def)
              FROM ladder.shape('rung2') WHERE kind = 'index');
    expected := (SELECT string_agg(tbl || ' ' || def, E'\n' ORDER BY tbl, def)
                   FROM ladder.shape('lean') WHERE kind = 'index');
    IF got IS DISTINCT FROM expected THEN
        RAISE EXCEPTION 'rung2''s keys are not the lean tables'':%', E'\n' || got;
    END IF;
    -- rung3: rung2 with its domains' base types; the CHECKs only spelled without the casts.
    got := ladder.diff('rung2', 'rung3', as_base => true);
    IF got ~ E'(^|\n)[-+] \\S+ (column|index|foreign key)'
       OR (SELECT count(*) FROM ladder.shape('rung2') WHERE kind = 'check')
          <> (SELECT count(*) FROM ladder.shape('rung3') WHERE kind = 'check')
       OR ladder.diff('rung2', 'rung3') !~ '^[+] \S+ column' THEN
        RAISE EXCEPTION 'rung3 is not rung2 with base types:%', E'\n' || got;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                 JOIN pg_namespace s ON s.oid = c.relnamespace AND s.nspname = 'rung3' AND c.relkind = 'r'
                 JOIN pg_type t ON t.oid = a.atttypid AND t.typtype = 'd') THEN
        RAISE EXCEPTION 'rung3 still has a column of a domain';
    END IF;
    -- rung4: rung3 without its CHECKs, which are the lean tables but for the outbox event ID's
    -- default (payrecon's uuid_generate_v7(), where lean has its own copy, lean.uuid_v7()).
    got := ladder.diff('rung3', 'rung4');
    IF got = '' OR got ~ E'(^|\n)(\\+|- \\S+ (column|index|foreign key))' THEN
        RAISE EXCEPTION 'rung4 is not rung3 without its CHECKs:%', E'\n' || got;
    END IF;
    got := ladder.diff('lean', 'rung4');
    IF got <> '+ outbox column: event_id uuid NOT NULL DEFAULT public.uuid_generate_v7()' || E'\n'
              || '- outbox column: event_id uuid NOT NULL DEFAULT lean.uuid_v7()' THEN
        RAISE EXCEPTION 'rung4''s tables are not the lean ones:%', E'\n' || got;
    END IF;
    FOR n IN 5..8 LOOP
        got := ladder.diff('rung4', 'rung' || n);
        IF got <> '' THEN
            RAISE EXCEPTION 'rung%''s tables are not rung4''s:%', n, E'\n' || got;
        END IF;
    END LOOP;
END $$;
