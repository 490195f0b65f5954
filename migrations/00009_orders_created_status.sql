-- +goose Up
-- The dashboard counts the orders of the last hour and day by status:
-- with the status in the index that count is an index-only scan (measured
-- on 200,000 orders: about half the time of reading each order's row).
-- The index still serves the orders list's time windows, which it
-- replaces orders_created_at_idx for.
CREATE INDEX orders_created_at_status_idx ON orders (created_at, status);
DROP INDEX orders_created_at_idx;

-- +goose Down
CREATE INDEX orders_created_at_idx ON orders (created_at);
DROP INDEX orders_created_at_status_idx;
