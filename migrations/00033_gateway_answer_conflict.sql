-- +goose Up

-- What a gateway's answer stated of the money of what it made — a
-- refund's amount and currency, a hosted page's — where it states them
-- (NULL and '': it states none, as Midtrans's Snap does, or no answer
-- yet). An answer that states another amount or currency than asked is
-- phase conflict: nothing of it is applied (no refund counted, no page
-- offered), the call is never sent again under its key — the gateway did
-- make something — and an operator settles it in the gateway's dashboard
-- (docs/gateway-calls.md#answers-checked). A done row records its answer
-- too, so the audit can check that every done call was answered as
-- asked.
ALTER TABLE gateway_requests
    ADD COLUMN answered_amount bigint CHECK (answered_amount >= 0 AND answered_amount <= 1000000000000000),
    ADD COLUMN answered_currency text NOT NULL DEFAULT '' CHECK (answered_currency = '' OR answered_currency ~ '^[A-Z]{3}$');
ALTER TABLE gateway_requests DROP CONSTRAINT gateway_requests_phase_check;
ALTER TABLE gateway_requests ADD CONSTRAINT gateway_requests_phase_check
    CHECK (phase IN ('awaiting_approval', 'planned', 'sent', 'done', 'failed', 'declined', 'discarded', 'conflict'));
-- A conflict is an answer: the gateway's object and what it stated.
ALTER TABLE gateway_requests ADD CONSTRAINT gateway_requests_conflict_has_answer
    CHECK (phase <> 'conflict' OR (provider_object_id <> '' AND done_at IS NOT NULL AND answered_amount IS NOT NULL));
-- Each one raises gateway.conflict (docs/operations.md#operational-webhooks).
ALTER TABLE alerts DROP CONSTRAINT alerts_type_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_type_check
    CHECK (type IN ('audit.red', 'jobs.archived', 'callbacks.conflict_burst', 'reconciler.resent', 'refund.failed',
                    'gateway.unreachable', 'gateway.conflict'));

-- +goose Down
DELETE FROM alerts WHERE type = 'gateway.conflict';
ALTER TABLE alerts DROP CONSTRAINT alerts_type_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_type_check
    CHECK (type IN ('audit.red', 'jobs.archived', 'callbacks.conflict_burst', 'reconciler.resent', 'refund.failed',
                    'gateway.unreachable'));
UPDATE gateway_requests SET phase = 'failed' WHERE phase = 'conflict';
ALTER TABLE gateway_requests DROP CONSTRAINT gateway_requests_conflict_has_answer;
ALTER TABLE gateway_requests DROP CONSTRAINT gateway_requests_phase_check;
ALTER TABLE gateway_requests ADD CONSTRAINT gateway_requests_phase_check
    CHECK (phase IN ('awaiting_approval', 'planned', 'sent', 'done', 'failed', 'declined', 'discarded'));
ALTER TABLE gateway_requests DROP COLUMN answered_currency, DROP COLUMN answered_amount;
