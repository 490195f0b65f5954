-- +goose Up

-- Refund approval (docs/admin.md#refunds): a refund above
-- REFUND_APPROVAL_ABOVE is written awaiting_approval, with no job, and is
-- sent only once another owner approves it (→ planned, with its job) or
-- ends declined. Both phases are not sent; awaiting_approval still holds
-- its amount back from what is left to refund, declined does not.
ALTER TABLE gateway_requests DROP CONSTRAINT gateway_requests_phase_check;
ALTER TABLE gateway_requests ADD CONSTRAINT gateway_requests_phase_check
    CHECK (phase IN ('awaiting_approval', 'planned', 'sent', 'done', 'failed', 'declined'));
ALTER TABLE gateway_requests
    ADD COLUMN approved_by text NOT NULL DEFAULT '' CHECK (length(approved_by) <= 254),
    ADD COLUMN approved_at timestamptz,
    ADD COLUMN declined_by text NOT NULL DEFAULT '' CHECK (length(declined_by) <= 254),
    ADD COLUMN declined_at timestamptz,
    -- only a refund waits for approval
    ADD CONSTRAINT gateway_requests_approval_is_refund CHECK (phase <> 'awaiting_approval' OR kind = 'refund'),
    -- a decision says who made it and when
    ADD CONSTRAINT gateway_requests_approved_has_who CHECK ((approved_by = '') = (approved_at IS NULL)),
    ADD CONSTRAINT gateway_requests_declined_has_who CHECK (phase <> 'declined' OR (declined_by <> '' AND declined_at IS NOT NULL));
-- The refunds waiting for an owner.
CREATE INDEX gateway_requests_awaiting_idx ON gateway_requests (id) WHERE phase = 'awaiting_approval';

-- +goose Down
DROP INDEX gateway_requests_awaiting_idx;
DELETE FROM gateway_requests WHERE phase IN ('awaiting_approval', 'declined');
ALTER TABLE gateway_requests
    DROP CONSTRAINT gateway_requests_approval_is_refund,
    DROP COLUMN approved_by, DROP COLUMN approved_at, DROP COLUMN declined_by, DROP COLUMN declined_at;
ALTER TABLE gateway_requests DROP CONSTRAINT gateway_requests_phase_check;
ALTER TABLE gateway_requests ADD CONSTRAINT gateway_requests_phase_check
    CHECK (phase IN ('planned', 'sent', 'done', 'failed'));
