-- +goose Up

-- Refunds Sekali asks a gateway for (from the console or the admin API)
-- are gateway_requests too: the row is the refund record — its amount,
-- the charge it refunds, why and who asked — written in the same
-- transaction as the decision, with the provider idempotency key every
-- repeat of the call carries. What the refund does to the money (a
-- refunds row, the payment's refunded total, the order's status) is
-- applied when the gateway's answer or its notification tells it,
-- whichever comes first, under the refunds table's unique key.
ALTER TABLE gateway_requests DROP CONSTRAINT gateway_requests_kind_check;
ALTER TABLE gateway_requests ADD CONSTRAINT gateway_requests_kind_check
    CHECK (kind IN ('create_payment', 'refund'));
ALTER TABLE gateway_requests
    ADD COLUMN payment_id   bigint REFERENCES payments (id),
    ADD COLUMN reason       text NOT NULL DEFAULT '' CHECK (length(reason) <= 500),
    ADD COLUMN requested_by text NOT NULL DEFAULT '' CHECK (length(requested_by) <= 255),
    ADD CONSTRAINT gateway_requests_refund_has_payment CHECK (kind <> 'refund' OR payment_id IS NOT NULL);
-- An order's requests, for its page and for what is left to refund.
CREATE INDEX gateway_requests_order_id_idx ON gateway_requests (order_id, id);

-- +goose Down
DROP INDEX gateway_requests_order_id_idx;
DELETE FROM gateway_requests WHERE kind = 'refund';
ALTER TABLE gateway_requests DROP COLUMN payment_id, DROP COLUMN reason, DROP COLUMN requested_by;
ALTER TABLE gateway_requests DROP CONSTRAINT gateway_requests_kind_check;
ALTER TABLE gateway_requests ADD CONSTRAINT gateway_requests_kind_check CHECK (kind IN ('create_payment'));
