-- A provider event that contradicts a payment that settled without it (we have failed, the
-- provider says succeeded; another amount or currency) never changes the payment: succeeded and
-- failed are terminal. It waits in the review queue until an operator has looked at it and says
-- what was done (`payrecon events acknowledge ID --note`, audited): who, when, and the note.
ALTER TABLE provider_events
    ADD COLUMN acknowledged_at timestamptz,
    ADD COLUMN acknowledged_by text,
    ADD COLUMN acknowledge_note text CHECK (octet_length(acknowledge_note) <= 4096);

-- The review queue's and nightly's question: the contradictions nobody has acknowledged.
CREATE INDEX provider_events_contradicting ON provider_events (received_at, event_id)
    WHERE applied_result = 'contradicts' AND acknowledged_at IS NULL;
