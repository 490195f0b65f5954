-- +goose Up

-- A refund notification marks the payment and the order refunded (the
-- stock is not given back: the goods may have shipped). A notification
-- the shop does not handle is answered "ignored" and its delivery kept.
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('pending', 'paid', 'failed', 'expired', 'cancelled', 'refund_required', 'refunded'));
ALTER TABLE payments DROP CONSTRAINT payments_status_check;
ALTER TABLE payments ADD CONSTRAINT payments_status_check
    CHECK (status IN ('pending', 'succeeded', 'failed', 'expired', 'refund_required', 'refunded'));
ALTER TABLE callback_deliveries DROP CONSTRAINT callback_deliveries_outcome_check;
ALTER TABLE callback_deliveries ADD CONSTRAINT callback_deliveries_outcome_check
    CHECK (outcome IN ('processed', 'stale', 'duplicate', 'conflict', 'rejected', 'ignored',
                       'invalid_signature', 'invalid_payload', 'missing_field',
                       'too_large', 'unsupported_media_type', 'error'));

-- +goose Down
ALTER TABLE callback_deliveries DROP CONSTRAINT callback_deliveries_outcome_check;
ALTER TABLE callback_deliveries ADD CONSTRAINT callback_deliveries_outcome_check
    CHECK (outcome IN ('processed', 'stale', 'duplicate', 'conflict', 'rejected',
                       'invalid_signature', 'invalid_payload', 'missing_field',
                       'too_large', 'unsupported_media_type', 'error'));
ALTER TABLE payments DROP CONSTRAINT payments_status_check;
ALTER TABLE payments ADD CONSTRAINT payments_status_check
    CHECK (status IN ('pending', 'succeeded', 'failed', 'expired', 'refund_required'));
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
    CHECK (status IN ('pending', 'paid', 'failed', 'expired', 'cancelled', 'refund_required'));
