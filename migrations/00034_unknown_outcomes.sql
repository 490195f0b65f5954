-- +goose Up

-- A call whose outcome is unknown — sent and its answer lost, or a refund
-- the gateway accepted and has not settled (pending) — is asked about
-- again on its gateway's schedule until the gateway says final
-- (gatewaycalls.Schedules, app/janitor, docs/gateway-calls.md).
-- unknown_since is when the outcome became unknown (the call's first
-- send); asks counts the janitor's questions about it (and "ask now");
-- next_ask_at is when it asks next. Both times are NULL once the outcome
-- is known; asks stays, as the row's history.
ALTER TABLE gateway_requests
    ADD COLUMN unknown_since timestamptz,
    ADD COLUMN asks          int NOT NULL DEFAULT 0 CHECK (asks >= 0),
    ADD COLUMN next_ask_at   timestamptz,
    ADD CONSTRAINT gateway_requests_asked_when_unknown CHECK (next_ask_at IS NULL OR unknown_since IS NOT NULL);
-- The janitor's due rows, soonest first; few rows are ever in it.
CREATE INDEX gateway_requests_next_ask_idx ON gateway_requests (next_ask_at) WHERE next_ask_at IS NOT NULL;

-- The unknowns of before: asked at the janitor's first run.
UPDATE gateway_requests SET unknown_since = updated_at, next_ask_at = now() WHERE phase = 'sent';
UPDATE gateway_requests g SET unknown_since = coalesce(g.done_at, g.updated_at), next_ask_at = now()
WHERE g.kind = 'refund' AND g.phase = 'done'
  AND EXISTS (SELECT 1 FROM refunds r WHERE r.provider = g.provider AND r.payment_id = g.payment_id
              AND r.refund_key IN (g.provider_object_id, g.idempotency_key) AND r.status = 'pending');

-- +goose Down
DROP INDEX gateway_requests_next_ask_idx;
ALTER TABLE gateway_requests DROP CONSTRAINT gateway_requests_asked_when_unknown,
    DROP COLUMN unknown_since, DROP COLUMN asks, DROP COLUMN next_ask_at;
