-- +goose Up

-- Stock cannot be hoarded. A product may cap the units of it one order
-- holds (max_per_order; NULL: no cap but ORDER_MAX_UNITS), and each order
-- keeps the client address that made it, so that one client cannot hold
-- more than OPEN_ORDERS_PER_CLIENT unpaid orders at once.
ALTER TABLE products ADD COLUMN max_per_order bigint
    CONSTRAINT products_max_per_order_check CHECK (max_per_order BETWEEN 1 AND 1000000);
ALTER TABLE orders ADD COLUMN client_addr text NOT NULL DEFAULT ''
    CONSTRAINT orders_client_addr_bound CHECK (length(client_addr) <= 255);
CREATE INDEX orders_open_by_client_idx ON orders (client_addr) WHERE status = 'pending';

-- +goose Down
DROP INDEX orders_open_by_client_idx;
ALTER TABLE orders DROP COLUMN client_addr;
ALTER TABLE products DROP COLUMN max_per_order;
