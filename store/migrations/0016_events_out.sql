-- Events out (DESIGN section 15): the outbox delivered to the merchants' endpoints, at least once,
-- signed per Standard Webhooks, and readable by pulling (GET /v1/events).

-- A tenant's webhook endpoints. `event_types` are patterns: an event type ("payment.succeeded")
-- or a prefix ending in '*' ("payment.*"). An endpoint receives the events published after it was
-- added. Disabled by an operator or by a 410 from the endpoint; nothing is delivered to it then.
CREATE TABLE webhook_endpoints (
    tenant_id       uuid        NOT NULL REFERENCES tenants (tenant_id),
    endpoint_id     uuid        NOT NULL DEFAULT uuid_generate_v7(),
    url             text        NOT NULL CHECK (octet_length(url) BETWEEN 8 AND 2048),
    event_types     text[]      NOT NULL CHECK (cardinality(event_types) BETWEEN 1 AND 64),
    description     text        CHECK (octet_length(description) <= 512),
    state           text        NOT NULL DEFAULT 'enabled'
                                CHECK (state IN ('enabled', 'disabled')),
    disabled_at     timestamptz,
    disabled_reason text        CHECK (octet_length(disabled_reason) <= 1024),
    created_at      timestamptz NOT NULL DEFAULT now(),
    created_by      text        NOT NULL,
    -- Attempts recorded for this endpoint, by result (the attempts metric: a counter that purging
    -- attempts never makes go backwards).
    attempts_delivered bigint   NOT NULL DEFAULT 0 CHECK (attempts_delivered >= 0),
    attempts_failed    bigint   NOT NULL DEFAULT 0 CHECK (attempts_failed >= 0),
    PRIMARY KEY (tenant_id, endpoint_id)
);
COMMENT ON INDEX webhook_endpoints_pkey IS
    'an endpoint by (tenant, ID): endpoint list/disable/rotate-secret, the fan-out join';

-- An endpoint's signing secrets, sealed with AES-256-GCM under the endpoint key (a file outside
-- the database: core/sealed): the relay needs the secret itself to sign (HMAC is symmetric), so
-- a digest cannot do, and a copy of the database alone signs nothing. The newest secret signs;
-- an older one signs beside it until `retire_at` (a rotation's overlap).
CREATE TABLE webhook_endpoint_secrets (
    tenant_id   uuid        NOT NULL,
    endpoint_id uuid        NOT NULL,
    secret_no   integer     NOT NULL CHECK (secret_no >= 1),
    sealed      bytea       NOT NULL CHECK (octet_length(sealed) BETWEEN 29 AND 1024),
    created_at  timestamptz NOT NULL DEFAULT now(),
    retire_at   timestamptz,
    PRIMARY KEY (tenant_id, endpoint_id, secret_no),
    FOREIGN KEY (tenant_id, endpoint_id) REFERENCES webhook_endpoints (tenant_id, endpoint_id)
);
COMMENT ON INDEX webhook_endpoint_secrets_pkey IS
    'the secrets an endpoint signs with (the relay, per batch), rotate-secret';

-- Publishing: the relay numbers each committed event once, in the order it sees them
-- (`publish_seq`, from one counter row, under one advisory lock), and fans it out to the
-- endpoints subscribed then. `seq` (the identity) is assigned before commit, so a reader of seq
-- could pass over an event that commits late; `publish_seq` is assigned after, so a cursor over it
-- never skips one. Per payment both orders agree (a payment's changes are serialized by its row).
ALTER TABLE outbox ADD COLUMN publish_seq bigint;
CREATE INDEX outbox_unpublished ON outbox (seq) WHERE published_at IS NULL;
COMMENT ON INDEX outbox_unpublished IS
    'the relay''s publish step: events not yet published, in seq order';
CREATE UNIQUE INDEX outbox_published ON outbox (tenant_id, publish_seq)
    WHERE publish_seq IS NOT NULL;
COMMENT ON INDEX outbox_published IS
    'GET /v1/events?after=CURSOR: a tenant''s published events in publish order';
CREATE TABLE outbox_publish_counter (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    last     bigint  NOT NULL
);
INSERT INTO outbox_publish_counter (last) VALUES (0);
-- Events written before the relay existed are published as they are (in seq order), once, to
-- no endpoint: they can be pulled; no endpoint existed to push them to.
WITH numbered AS (
    SELECT tenant_id, event_id, row_number() OVER (ORDER BY seq) AS n FROM outbox
)
UPDATE outbox o SET publish_seq = numbered.n, published_at = coalesce(o.published_at, now())
  FROM numbered WHERE o.tenant_id = numbered.tenant_id AND o.event_id = numbered.event_id;
UPDATE outbox_publish_counter SET last = (SELECT count(*) FROM outbox);

-- Does `event_type` match one of `patterns` (an exact type, or a prefix ending in '*')?
CREATE FUNCTION payrecon_event_matches(patterns text[], event_type text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT EXISTS (SELECT 1 FROM unnest(patterns) p
                    WHERE p = event_type
                       OR (right(p, 1) = '*' AND starts_with(event_type, left(p, -1))))
$$;

-- One event to one endpoint. `pending` until a 2xx (`delivered`) or the last scheduled attempt
-- (`dead`); a replay makes it pending again with a fresh schedule (`tries` = 0); an operator may
-- discard a dead one (`discarded`: never to be sent, audited; retention may then purge it). Claimed like a
-- payment: a lease with a generation that fences the relay that holds it.
CREATE TABLE event_deliveries (
    tenant_id        uuid        NOT NULL,
    delivery_id      bigint      GENERATED ALWAYS AS IDENTITY,
    endpoint_id      uuid        NOT NULL,
    event_id         uuid        NOT NULL,
    publish_seq      bigint      NOT NULL,
    aggregate_id     uuid        NOT NULL,
    state            text        NOT NULL DEFAULT 'pending'
                                 CHECK (state IN ('pending', 'delivered', 'dead', 'discarded')),
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    tries            integer     NOT NULL DEFAULT 0 CHECK (tries >= 0),
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_owner      text,
    lease_generation bigint      NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    last_status      integer,
    last_error       text        CHECK (octet_length(last_error) <= 1024),
    created_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    dead_at          timestamptz,
    PRIMARY KEY (tenant_id, delivery_id),
    UNIQUE (tenant_id, event_id, endpoint_id),
    FOREIGN KEY (tenant_id, endpoint_id) REFERENCES webhook_endpoints (tenant_id, endpoint_id)
);
COMMENT ON INDEX event_deliveries_pkey IS
    'a delivery by ID: deliveries show/replay, the relay''s flush';
COMMENT ON INDEX event_deliveries_tenant_id_event_id_endpoint_id_key IS
    'one delivery per (event, endpoint): the fan-out''s ON CONFLICT, an event''s deliveries (purge)';
-- The relay's claim: pending deliveries in the order they became due, and per endpoint and payment
-- the earliest pending one (a later event waits for it: per payment, in order).
CREATE INDEX event_deliveries_due ON event_deliveries (next_attempt_at)
    WHERE state = 'pending';
COMMENT ON INDEX event_deliveries_due IS
    'the relay''s claim: pending deliveries by when they are due; the lag metric';
CREATE INDEX event_deliveries_pending ON event_deliveries (tenant_id, endpoint_id, publish_seq)
    WHERE state = 'pending';
COMMENT ON INDEX event_deliveries_pending IS
    'the relay''s claim: an endpoint''s pending deliveries in publish order';
CREATE INDEX event_deliveries_order ON event_deliveries (tenant_id, endpoint_id, aggregate_id,
                                                         publish_seq)
    WHERE state = 'pending';
COMMENT ON INDEX event_deliveries_order IS
    'the relay''s claim: is an earlier event of this payment still pending for this endpoint?';
CREATE INDEX event_deliveries_dead ON event_deliveries (dead_at) WHERE state = 'dead';
COMMENT ON INDEX event_deliveries_dead IS
    'deliveries list --dead, nightly''s attention, the dead-letter metric';

-- Every attempt, as the relay saw it.
CREATE TABLE delivery_attempts (
    tenant_id        uuid        NOT NULL,
    delivery_id      bigint      NOT NULL,
    attempt_no       integer     NOT NULL CHECK (attempt_no >= 1),
    started_at       timestamptz NOT NULL,
    latency_ms       integer     NOT NULL CHECK (latency_ms >= 0),
    http_status      integer     CHECK (http_status BETWEEN 100 AND 599),
    outcome          text        NOT NULL
                                 CHECK (outcome IN ('delivered', 'retry', 'gone', 'dead',
                                                    'refused')),
    response_excerpt text        CHECK (octet_length(response_excerpt) <= 1024),
    error            text        CHECK (octet_length(error) <= 1024),
    relay            text        NOT NULL,
    PRIMARY KEY (tenant_id, delivery_id, attempt_no)
);
COMMENT ON INDEX delivery_attempts_pkey IS
    'a delivery''s attempts: deliveries show, purge';

-- Retention (`payrecon deliveries purge`, the relay hourly): per tenant, the highest publish_seq
-- purged. A pull cursor below it has missed purged events: GET /v1/events answers 410 and says
-- where the kept events start, rather than skipping them silently.
CREATE TABLE outbox_purged (
    tenant_id   uuid   PRIMARY KEY REFERENCES tenants (tenant_id),
    through_seq bigint NOT NULL
);
COMMENT ON INDEX outbox_purged_pkey IS 'GET /v1/events: was this tenant''s cursor purged past?';
