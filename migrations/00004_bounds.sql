-- +goose Up

-- The upper bounds of money and quantities (models/text.go), as the last
-- guard: the code checks them before any arithmetic, so no total can
-- overflow. A database holding larger values from before refuses this
-- migration; fix those rows first.
ALTER TABLE products
    ADD CONSTRAINT products_price_bound CHECK (price <= 1000000000000),
    ADD CONSTRAINT products_stock_bound CHECK (stock <= 1000000000000);
ALTER TABLE order_items
    ADD CONSTRAINT order_items_qty_bound CHECK (qty <= 1000000),
    ADD CONSTRAINT order_items_unit_price_bound CHECK (unit_price <= 1000000000000);
ALTER TABLE orders ADD CONSTRAINT orders_total_amount_bound CHECK (total_amount <= 1000000000000000);
ALTER TABLE payments ADD CONSTRAINT payments_amount_bound CHECK (amount <= 1000000000000000);
ALTER TABLE payment_callbacks ADD CONSTRAINT payment_callbacks_amount_bound CHECK (amount BETWEEN 0 AND 1000000000000000);

-- +goose Down
ALTER TABLE payment_callbacks DROP CONSTRAINT payment_callbacks_amount_bound;
ALTER TABLE payments DROP CONSTRAINT payments_amount_bound;
ALTER TABLE orders DROP CONSTRAINT orders_total_amount_bound;
ALTER TABLE order_items DROP CONSTRAINT order_items_unit_price_bound, DROP CONSTRAINT order_items_qty_bound;
ALTER TABLE products DROP CONSTRAINT products_stock_bound, DROP CONSTRAINT products_price_bound;
