-- Workers claim due payments oldest first (ORDER BY coalesce(next_attempt_at, created_at)).
-- Without an index on that expression every claim sorted all pending rows: claims slowed down as
-- the backlog grew (bench/executor: pgbench's own claim rate halved from 1,000 to 10,000 pending).
CREATE INDEX payments_due ON payments ((coalesce(next_attempt_at, created_at)))
    WHERE state IN ('pending', 'retry_scheduled');
