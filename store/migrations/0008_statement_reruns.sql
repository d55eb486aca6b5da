-- A re-run of a statement window lists into a run of its own. The window's last complete result
-- (its 'done' run, with its records and findings) stays until the re-run's diff is complete, and is
-- replaced by it in that one transaction: a re-run that fails (a wrong API key, an outage) never
-- destroys what the last complete run found. At most one complete and one unfinished run per window.
ALTER TABLE recon_runs DROP CONSTRAINT recon_runs_provider_window_from_window_to_key;
-- open_statement_run finds a window's runs; the unfinished one is resumed, the complete one kept.
CREATE UNIQUE INDEX recon_runs_window_done ON recon_runs (provider, window_from, window_to)
    WHERE status = 'done';
CREATE UNIQUE INDEX recon_runs_window_open ON recon_runs (provider, window_from, window_to)
    WHERE status <> 'done';
