-- Provider webhooks (DESIGN section 14): every verified notification event, stored as received
-- before anything interprets it, once per the provider's event identity (a redelivery counts in
-- `deliveries`). What it says about a payment is parsed beside it; `payment_id` links it when the
-- operation ID is one of ours (NULL: a payment we do not know -- kept and shown). The reconciler
-- marks what it applied (`applied_at`, `applied_result`). A request that fails verification is
-- not stored: serve counts it.
CREATE TABLE provider_events (
    event_id           bigserial   PRIMARY KEY,
    provider           text        NOT NULL,
    event_key          text        NOT NULL CHECK (octet_length(event_key) BETWEEN 1 AND 255),
    event_type         text        NOT NULL,
    outcome            text        NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'pending', 'other')),
    operation_id       text,
    provider_reference text,
    amount_minor       bigint,
    currency           text,
    occurred_at        timestamptz,
    received_at        timestamptz NOT NULL DEFAULT now(),
    last_received_at   timestamptz NOT NULL DEFAULT now(),
    deliveries         integer     NOT NULL DEFAULT 1,
    body               bytea       NOT NULL,
    tenant_id          uuid,
    payment_id         uuid,
    applied_at         timestamptz,
    applied_result     text,
    UNIQUE (provider, event_key)
);

-- A payment's events (payments show, review show).
CREATE INDEX provider_events_payment ON provider_events (payment_id, received_at)
    WHERE payment_id IS NOT NULL;
-- The reconciler's and the worker's question, asked every poll: the terminal evidence not yet
-- applied. Small: an event leaves it once applied, or once found to agree with (or contradict) a
-- payment that settled without it.
CREATE INDEX provider_events_unapplied ON provider_events (received_at, event_id)
    WHERE applied_at IS NULL AND payment_id IS NOT NULL AND outcome IN ('succeeded', 'failed');
-- Operators' question: the events of payments we do not know.
CREATE INDEX provider_events_unmatched ON provider_events (provider, received_at)
    WHERE payment_id IS NULL;
