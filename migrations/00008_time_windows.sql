-- +goose Up
-- The console's callbacks list limited to a time window is ordered by
-- first_received_at (store.WindowKeyset): this index serves it, as
-- callback_deliveries (received_at) and orders (created_at) serve theirs.
CREATE INDEX payment_callbacks_first_received_at_idx ON payment_callbacks (first_received_at, id);

-- +goose Down
DROP INDEX payment_callbacks_first_received_at_idx;
