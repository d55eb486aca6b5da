-- A payment remembers the Idempotency-Key it was created under, as a keyed digest (HMAC-SHA256 under
-- the fingerprint secret, like idempotency_records.request_hash: a key holds whatever a client put
-- in it, and it must not outlive its record in the clear). Once purge has deleted the key's record,
-- a retry with that key is told the record expired and which payment it made -- not that the
-- payment exists "under another Idempotency-Key". NULL for payments made before this migration.
ALTER TABLE payments ADD COLUMN idempotency_key_hash bytea
    CHECK (idempotency_key_hash IS NULL OR octet_length(idempotency_key_hash) = 32);

-- Actions on the whole deployment rather than one tenant (a purge run's summary) are audited under
-- the nil UUID; every tenant whose records such an action touched also gets a row of its own.
COMMENT ON COLUMN audit_log.tenant_id IS
    'the tenant acted on; 00000000-0000-0000-0000-000000000000 for the whole deployment (purge runs)';
