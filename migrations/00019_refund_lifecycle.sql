-- +goose Up

-- A refund has the gateway's own states: pending (accepted, not final),
-- succeeded, failed or canceled. Pending and succeeded refunds count in
-- their payment's refunded_amount; a refund that fails after it was
-- counted gives its amount back to the charge. A refund the gateway told
-- only as a charge's total ({reference}:refunded:{total}) stands for money
-- not yet named: when the gateway names the refund, the named row takes
-- its place (the placeholder's amount shrinks, or it is superseded), so
-- one refund never counts twice.
ALTER TABLE refunds
    ADD COLUMN status         text        NOT NULL DEFAULT 'succeeded'
        CONSTRAINT refunds_status_check CHECK (status IN ('pending', 'succeeded', 'failed', 'canceled', 'superseded')),
    ADD COLUMN failure_reason text        NOT NULL DEFAULT '' CHECK (length(failure_reason) <= 500),
    ADD COLUMN updated_at     timestamptz NOT NULL DEFAULT now();
UPDATE refunds SET updated_at = created_at;

-- refunded_from is the status a refunded payment had before its refunds
-- reached its amount (succeeded: the order's own charge; refund_required:
-- a charge that had to go back), and returns to if one of them fails.
ALTER TABLE payments
    ADD COLUMN refunded_from text NOT NULL DEFAULT ''
        CONSTRAINT payments_refunded_from_check CHECK (refunded_from IN ('', 'succeeded', 'refund_required')),
    -- disputed_amount is what a dispute took back (a lost chargeback) or
    -- holds (an open one): no longer refundable.
    ADD COLUMN disputed_amount bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT payments_disputed_amount_bound CHECK (disputed_amount BETWEEN 0 AND amount);
-- The charge of a refunded order is its own; any other refunded charge had
-- to go back.
UPDATE payments p SET refunded_from = CASE
    WHEN o.status = 'refunded' AND p.id = (SELECT min(q.id) FROM payments q WHERE q.order_id = o.id AND q.status = 'refunded')
    THEN 'succeeded' ELSE 'refund_required' END
FROM orders o WHERE o.id = p.order_id AND p.status = 'refunded';
UPDATE payments SET disputed_amount = amount WHERE dispute IN ('open', 'lost');

-- +goose Down
ALTER TABLE payments DROP COLUMN refunded_from, DROP COLUMN disputed_amount;
DELETE FROM refunds WHERE status IN ('failed', 'canceled', 'superseded');
ALTER TABLE refunds DROP COLUMN status, DROP COLUMN failure_reason, DROP COLUMN updated_at;
