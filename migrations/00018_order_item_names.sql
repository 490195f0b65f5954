-- +goose Up

-- An order's items keep the product's name as it was sold. The hosted
-- payment page lists the items by name, and every repeat of that call
-- must send the gateway the same request (Stripe refuses a key with other
-- parameters): a product renamed between two presses of Pay would
-- otherwise change it. The shop's order page shows the name sold, too.
ALTER TABLE order_items ADD COLUMN name text NOT NULL DEFAULT '';
UPDATE order_items i SET name = p.name FROM products p WHERE p.sku = i.sku;

-- +goose Down
ALTER TABLE order_items DROP COLUMN name;
