-- Events out: each tenant's events are numbered by a counter of that tenant's (issue 36, item 8).
-- One counter for all tenants made GET /v1/events' cursor a side channel: the gap between two of
-- one tenant's events was every tenant's volume meanwhile. Per tenant, `publish_seq` still grows
-- in the order the relay publishes, so a cursor never skips an event; a tenant's numbers go on
-- from its highest, so the cursors clients hold stay valid. (Also one global row fewer for a
-- database sharded by tenant.)
CREATE TABLE outbox_tenant_publish_counters (
    tenant_id uuid   NOT NULL REFERENCES tenants (tenant_id),
    last      bigint NOT NULL CHECK (last >= 0),
    PRIMARY KEY (tenant_id)
);
COMMENT ON TABLE outbox_tenant_publish_counters IS
    'the last publish_seq given to each tenant''s events (the relay''s publish step)';
INSERT INTO outbox_tenant_publish_counters (tenant_id, last)
SELECT tenant_id, max(publish_seq) FROM outbox WHERE publish_seq IS NOT NULL GROUP BY tenant_id;
DROP TABLE outbox_publish_counter;

-- Statement findings: a match across windows (a counterpart found by operation ID outside the
-- window's reading: a re-send, or a late charge) is stored as a finding of category `matched`,
-- with both times in its detail; nothing else of category matched is stored.
ALTER TABLE recon_findings DROP CONSTRAINT recon_findings_category_check;
ALTER TABLE recon_findings ADD CONSTRAINT recon_findings_category_check CHECK (category IN
    ('matched', 'missing_remote', 'missing_local', 'amount_mismatch', 'currency_mismatch',
     'status_mismatch', 'duplicate_remote', 'unresolved_unknown'));
