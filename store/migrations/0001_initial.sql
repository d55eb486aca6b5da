-- payrecon schema, version 1. Every table is keyed tenant_id first (DESIGN section 13);
-- every column of a uniqueness key is NOT NULL (a NULL in a unique key lets duplicates in).

CREATE TABLE tenants (
    tenant_id  uuid        NOT NULL DEFAULT gen_random_uuid(),
    name       text        NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id),
    UNIQUE (name)
);

-- API credentials. Only the SHA-256 digest of a key is stored; tenant and role come from this row.
CREATE TABLE principals (
    tenant_id    uuid        NOT NULL REFERENCES tenants (tenant_id),
    principal_id uuid        NOT NULL DEFAULT gen_random_uuid(),
    name         text        NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    role         text        NOT NULL CHECK (role IN ('admin', 'writer', 'reader')),
    api_key_hash bytea       NOT NULL CHECK (octet_length(api_key_hash) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    PRIMARY KEY (tenant_id, principal_id),
    UNIQUE (tenant_id, name)
);
CREATE UNIQUE INDEX principals_api_key_hash ON principals (api_key_hash);
CREATE UNIQUE INDEX principals_principal_id ON principals (principal_id);

CREATE TABLE payments (
    tenant_id          uuid        NOT NULL REFERENCES tenants (tenant_id),
    payment_id         uuid        NOT NULL,
    merchant_reference text        NOT NULL CHECK (octet_length(merchant_reference) BETWEEN 1 AND 255),
    amount_minor       bigint      NOT NULL CHECK (amount_minor > 0),
    currency           text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    provider           text        NOT NULL CHECK (provider ~ '^[a-z0-9_-]{1,32}$'),
    payment_method     text        NOT NULL,
    customer           text,
    description        text,
    metadata           jsonb       NOT NULL DEFAULT '{}'::jsonb,
    -- Sent as the provider's idempotency key on every attempt; fits every provider's limit (45).
    operation_id       text        NOT NULL CHECK (operation_id ~ '^[\x21-\x7e]{1,45}$'),
    state              text        NOT NULL DEFAULT 'pending' CHECK (state IN
                           ('pending', 'processing', 'succeeded', 'failed', 'retry_scheduled',
                            'unknown', 'needs_review')),
    -- Fencing: every claim increments generation; every later write is conditioned on it.
    generation         bigint      NOT NULL DEFAULT 0,
    lease_owner        text,
    lease_expires_at   timestamptz,
    next_attempt_at    timestamptz,
    attempt_count      integer     NOT NULL DEFAULT 0,
    provider_reference text,
    review_reason      text,
    created_by         uuid        NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, payment_id),
    UNIQUE (tenant_id, merchant_reference),
    FOREIGN KEY (tenant_id, created_by) REFERENCES principals (tenant_id, principal_id),
    CHECK ((state = 'processing') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL))
);
CREATE UNIQUE INDEX payments_operation_id ON payments (operation_id);
-- Workers claim due work by state; the partial index keeps terminal rows out of the way.
CREATE INDEX payments_claimable ON payments (state, next_attempt_at)
    WHERE state IN ('pending', 'retry_scheduled', 'processing', 'unknown');

-- One row per (tenant, principal, operation, key). The payment and the stored response commit in
-- the same transaction as this row.
CREATE TABLE idempotency_records (
    tenant_id       uuid        NOT NULL,
    principal_id    uuid        NOT NULL,
    operation       text        NOT NULL CHECK (operation ~ '^[a-z_]{1,64}$'),
    idempotency_key text        NOT NULL CHECK (idempotency_key ~ '^[\x21-\x7e]{1,255}$'),
    request_hash    bytea       NOT NULL CHECK (octet_length(request_hash) = 32),
    response_status integer     CHECK (response_status BETWEEN 100 AND 599),
    response_body   text        CHECK (octet_length(response_body) <= 65536),
    resource_type   text,
    resource_id     uuid,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, principal_id, operation, idempotency_key),
    FOREIGN KEY (tenant_id, principal_id) REFERENCES principals (tenant_id, principal_id),
    CHECK ((response_status IS NULL) = (response_body IS NULL)),
    CHECK (expires_at > created_at)
);
CREATE INDEX idempotency_records_expires_at ON idempotency_records (expires_at);

-- Every call to a provider, whatever came of it.
CREATE TABLE payment_attempts (
    tenant_id          uuid        NOT NULL,
    payment_id         uuid        NOT NULL,
    attempt_no         integer     NOT NULL CHECK (attempt_no > 0),
    generation         bigint      NOT NULL,
    worker             text        NOT NULL,
    operation_id       text        NOT NULL,
    started_at         timestamptz NOT NULL,
    finished_at        timestamptz,
    outcome            text        NOT NULL DEFAULT 'unknown' CHECK (outcome IN
                           ('succeeded', 'declined', 'pending', 'not_sent', 'unknown')),
    http_status        integer,
    error_class        text,
    provider_reference text,
    detail             text        CHECK (octet_length(detail) <= 4096), -- redacted excerpt
    PRIMARY KEY (tenant_id, payment_id, attempt_no),
    FOREIGN KEY (tenant_id, payment_id) REFERENCES payments (tenant_id, payment_id)
);

-- Events written in the same transaction as the state change they describe; a relay delivers
-- them at least once with a stable event_id.
CREATE TABLE outbox (
    tenant_id      uuid        NOT NULL,
    event_id       uuid        NOT NULL DEFAULT gen_random_uuid(),
    seq            bigint      GENERATED ALWAYS AS IDENTITY,
    aggregate_type text        NOT NULL,
    aggregate_id   uuid        NOT NULL,
    event_type     text        NOT NULL,
    payload        jsonb       NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    published_at   timestamptz,
    PRIMARY KEY (tenant_id, event_id)
);
CREATE INDEX outbox_unpublished ON outbox (seq) WHERE published_at IS NULL;

-- Append-only: who did what, when, to what.
CREATE TABLE audit_log (
    tenant_id    uuid        NOT NULL,
    audit_id     bigint      GENERATED ALWAYS AS IDENTITY,
    at           timestamptz NOT NULL DEFAULT now(),
    actor        text        NOT NULL CHECK (length(actor) BETWEEN 1 AND 128),
    action       text        NOT NULL,
    subject_type text        NOT NULL,
    subject_id   text        NOT NULL,
    detail       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (tenant_id, audit_id)
);

CREATE FUNCTION audit_log_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER audit_log_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_is_append_only();
