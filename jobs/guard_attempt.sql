-- The attempt row of a run that claimed the job (its fence), and the
-- deletion of the job's attempts too old to keep (the newest maxAttempts
-- stay), in one statement. A record for people; a duplicate of the claim
-- leaves it as it is.
-- $1 key, $2 fence, $3 the newest fence to delete, $4 worker id, $5 now
WITH pruned AS (
    DELETE FROM job_attempts WHERE idempotency_key = $1 AND fence <= $3
)
INSERT INTO job_attempts (idempotency_key, fence, worker_id, started_at)
VALUES ($1, $2, $4, $5)
ON CONFLICT (idempotency_key, fence) DO NOTHING
