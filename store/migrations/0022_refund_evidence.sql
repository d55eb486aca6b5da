-- Webhooks as evidence for refunds (issue 31): a provider event about a refund is linked to the
-- refund (refund_id, the operations row) and to its payment (payment_id, so that a payment's
-- events list its refunds' too). The charge's evidence queries read only the events without a
-- refund; the refunds' read the others.
ALTER TABLE provider_events ADD COLUMN refund_id uuid;
COMMENT ON COLUMN provider_events.refund_id IS
    'the refund the event is about (operations.id), NULL for an event about a charge or unmatched';

-- When the provider reversed a refund it had reported succeeded (a late reversal: succeeded ->
-- failed, core's find_reversal); NULL for every other refund. An earlier event that reported the
-- success is then superseded, not a contradiction.
ALTER TABLE operations ADD COLUMN reversed_at timestamptz;
