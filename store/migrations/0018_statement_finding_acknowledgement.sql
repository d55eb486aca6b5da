-- Statement findings an operator can handle (issue 36, item 14).
--
-- Each finding has an ID of its own, printed in the report, that `payrecon statement findings
-- acknowledge ID --note` names. An acknowledged finding records who handled it, when, and what
-- was done (the note; the same rows go to audit_log); it stays in the report, marked handled, out
-- of the money at risk. When the window is run again, the acknowledgement goes with the same
-- finding (same category, same operation ID and reference, same detail) into the new run.
--
-- A finding names every provider reference of its key (`provider_references`): a duplicate_remote
-- holds two or more charges for one operation ID, and `provider_reference` shows only the first.
ALTER TABLE recon_findings
    ADD COLUMN finding_id uuid NOT NULL DEFAULT gen_random_uuid(),
    ADD COLUMN provider_references text[] NOT NULL DEFAULT '{}',
    ADD COLUMN acknowledged_at timestamptz,
    ADD COLUMN acknowledged_by text CHECK (length(acknowledged_by) BETWEEN 1 AND 128),
    ADD COLUMN acknowledge_note text CHECK (octet_length(acknowledge_note) <= 8192),
    ADD CONSTRAINT recon_findings_acknowledged_whole
        CHECK ((acknowledged_at IS NULL) = (acknowledged_by IS NULL)
               AND (acknowledged_at IS NULL) = (acknowledge_note IS NULL));
-- Findings written before this migration had one reference at most: it is all they know.
UPDATE recon_findings SET provider_references = ARRAY[provider_reference]
 WHERE provider_reference IS NOT NULL;
CREATE UNIQUE INDEX recon_findings_finding_id ON recon_findings (finding_id);
