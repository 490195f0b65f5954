-- +goose Up

-- A refund whose refund:send job an operator discarded is discarded too
-- (docs/jobs.md#discarding-a-job): it is never sent again — the ledger's
-- claim takes planned and sent rows only — and holds nothing back from
-- what is left to refund. last_error says who discarded it and why.
ALTER TABLE gateway_requests DROP CONSTRAINT gateway_requests_phase_check;
ALTER TABLE gateway_requests ADD CONSTRAINT gateway_requests_phase_check
    CHECK (phase IN ('awaiting_approval', 'planned', 'sent', 'done', 'failed', 'declined', 'discarded'));

-- +goose Down
UPDATE gateway_requests SET phase = 'failed' WHERE phase = 'discarded';
ALTER TABLE gateway_requests DROP CONSTRAINT gateway_requests_phase_check;
ALTER TABLE gateway_requests ADD CONSTRAINT gateway_requests_phase_check
    CHECK (phase IN ('awaiting_approval', 'planned', 'sent', 'done', 'failed', 'declined'));
