-- The fence check that ends a job's effect transaction: the job row
-- becomes succeeded only if the run's fence still holds it (and no
-- operator discarded it), and the run's attempt row ends with it. It
-- returns the job rows it updated: 0 means a newer claimant owns the job.
-- $1 key, $2 fence, $3 now, $4 the result's hash
WITH done AS (
    UPDATE job_executions
       SET status = 'succeeded', finished_at = $3, locked_until = NULL, last_error = '', result_hash = $4
     WHERE idempotency_key = $1 AND fence = $2 AND status <> 'discarded'
    RETURNING idempotency_key
), attempt AS (
    UPDATE job_attempts
       SET finished_at = $3, outcome = 'succeeded', error = ''
     WHERE idempotency_key IN (SELECT idempotency_key FROM done) AND fence = $2 AND finished_at IS NULL
)
SELECT count(*) FROM done
