-- The guard's claim: create the job's row, or take it over (attempts+1,
-- fence+1) unless it succeeded, was discarded, or another run's lease has
-- not run out. It returns the new fence (NULL when it did not claim) and,
-- for the run's log line, the status the row had in the statement's
-- snapshot (NULL for a new job) — one round trip for both.
-- $1 key, $2 queue, $3 business key, $4 worker id, $5 locked until, $6 now
WITH before AS (
    SELECT status FROM job_executions WHERE idempotency_key = $1
), claimed AS (
    INSERT INTO job_executions AS j (idempotency_key, queue_name, external_job_id, business_key,
                                     status, attempts, fence, worker_id, locked_until, started_at)
    VALUES ($1, $2, $1, $3, 'processing', 1, 1, $4, $5, $6)
    ON CONFLICT (idempotency_key) DO UPDATE
        SET status = 'processing', attempts = j.attempts + 1, fence = j.fence + 1,
            worker_id = EXCLUDED.worker_id, locked_until = EXCLUDED.locked_until,
            started_at = EXCLUDED.started_at, finished_at = NULL
        WHERE j.status NOT IN ('succeeded', 'discarded')
          AND NOT (j.status = 'processing' AND j.locked_until > EXCLUDED.started_at)
    RETURNING fence
)
SELECT (SELECT status FROM before), (SELECT fence FROM claimed)
