-- Statement reconciliation (DESIGN section 9): runs per provider and window, the provider's
-- records as listed (raw and normalised), and the findings of the diff. These belong to a
-- provider account, not to a tenant: like tenants and principals they are small reference data on
-- a sharded engine (a finding names the tenant of the payment it concerns).

CREATE TABLE recon_runs (
    run_id         uuid        NOT NULL DEFAULT gen_random_uuid(),
    provider       text        NOT NULL CHECK (provider ~ '^[a-z0-9_-]{1,32}$'),
    window_from    timestamptz NOT NULL,
    window_to      timestamptz NOT NULL,
    margin_s       integer     NOT NULL CHECK (margin_s >= 0),
    status         text        NOT NULL CHECK (status IN ('listing', 'listed', 'done', 'failed')),
    list_cursor    text,       -- where the listing resumes
    pages          integer     NOT NULL DEFAULT 0,
    remote_records bigint      NOT NULL DEFAULT 0,
    local_records  bigint      NOT NULL DEFAULT 0,
    counts         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    runs           integer     NOT NULL DEFAULT 1, -- times this window was run
    started_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    error          text,
    PRIMARY KEY (run_id),
    UNIQUE (provider, window_from, window_to),
    CHECK (window_to > window_from)
);

CREATE TABLE statement_records (
    run_id             uuid        NOT NULL REFERENCES recon_runs (run_id) ON DELETE CASCADE,
    provider_reference text        NOT NULL,
    match_key          text        NOT NULL COLLATE "C",
    operation_id       text,
    amount_minor       bigint      NOT NULL,
    amount_refunded    bigint      NOT NULL DEFAULT 0,
    currency           text        NOT NULL,
    status             text        NOT NULL,
    raw_status         text        NOT NULL,
    created_at         timestamptz NOT NULL,
    raw                jsonb,
    PRIMARY KEY (run_id, provider_reference) -- a page read again after a resume adds nothing
);
CREATE INDEX statement_records_match ON statement_records (run_id, match_key COLLATE "C");

CREATE TABLE recon_findings (
    run_id             uuid        NOT NULL REFERENCES recon_runs (run_id) ON DELETE CASCADE,
    finding_no         bigint      NOT NULL,
    category           text        NOT NULL CHECK (category IN
                           ('missing_remote', 'missing_local', 'amount_mismatch', 'currency_mismatch',
                            'status_mismatch', 'duplicate_remote', 'unresolved_unknown')),
    tenant_id          uuid,
    payment_id         uuid,
    operation_id       text,
    provider_reference text,
    local_amount       bigint,
    local_currency     text,
    local_state        text,
    remote_amount      bigint,
    remote_currency    text,
    remote_state       text,
    remote_count       integer     NOT NULL DEFAULT 0,
    detail             text        NOT NULL,
    PRIMARY KEY (run_id, finding_no)
);

-- Our side of a statement, read in match-key order for one provider and window.
CREATE INDEX payments_statement ON payments (provider, (coalesce(first_attempt_at, created_at)));
-- Provider records that do not carry our operation ID are paired by the provider's reference.
CREATE INDEX payments_provider_reference ON payments (provider, provider_reference)
    WHERE provider_reference IS NOT NULL;
