-- Intake's writes take no lock on a tenant's or principal's row (issue 33, bench/intake_ladder).
--
-- The foreign keys from payments, idempotency_records and operations to principals (the one from
-- payments to tenants went in 0010) made every insert lock the principal's row FOR KEY SHARE.
-- Most of a tenant's requests come with the same principal (one API key): concurrent inserts
-- share that lock, and each sharing creates a MultiXact -- one per intake transaction at 16
-- clients (85-91 bytes of WAL each, and MultiXact IDs a vacuum must later freeze: at 3,000
-- payments/s, autovacuum_multixact_freeze_max_age's 400 million is reached within two days). The
-- keys guarded only against a delete no code makes: tenants and principals are revoked, never
-- deleted (a payment's record names who created it for as long as it is kept). That is now said
-- by the tables themselves: no DELETE or TRUNCATE of either. Intake checks the principal in its
-- one statement (revoked_at IS NULL, in the same snapshot as its writes; a key share lock never
-- held off a revocation, an UPDATE of a non-key column), so nothing else changes.
--
-- Kept: the foreign keys between rows of one payment (attempts, lookups and operations to their
-- payment), whose writers already hold the payment's row lock.
DO $$
DECLARE fk record;
BEGIN
    FOR fk IN
        SELECT c.conrelid::regclass AS tbl, c.conname
          FROM pg_constraint c
         WHERE c.contype = 'f'
           AND c.conrelid IN ('payments'::regclass, 'idempotency_records'::regclass,
                              'operations'::regclass)
           AND c.confrelid IN ('tenants'::regclass, 'principals'::regclass)
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', fk.tbl, fk.conname);
    END LOOP;
END $$;

-- TG_ARGV[0]: why, and what to do instead, for the operator who tried.
CREATE FUNCTION payrecon_never_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% rows are never deleted: %', TG_TABLE_NAME, TG_ARGV[0]
        USING ERRCODE = 'restrict_violation';
END $$;

CREATE TRIGGER tenants_never_deleted BEFORE DELETE OR TRUNCATE ON tenants
    FOR EACH STATEMENT EXECUTE FUNCTION payrecon_never_deleted(
        'its payments, principals and audit rows name it for as long as they are kept; to shut a '
        'tenant out, revoke its principals (payrecon principal revoke ID)');
CREATE TRIGGER principals_never_deleted BEFORE DELETE OR TRUNCATE ON principals
    FOR EACH STATEMENT EXECUTE FUNCTION payrecon_never_deleted(
        'payments name the principal that created them for as long as they are kept; revoke it '
        'instead (payrecon principal revoke ID)');
