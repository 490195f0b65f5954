-- +goose Up

-- A dispute (a chargeback the customer's bank opened) is recorded on the
-- charge it disputes: open while it runs, then won or lost. It changes
-- no order status: a lost dispute marks the payment, and an admin
-- decides what follows.
ALTER TABLE payments ADD COLUMN dispute text NOT NULL DEFAULT ''
    CONSTRAINT payments_dispute_check CHECK (dispute IN ('', 'open', 'won', 'lost'));

-- +goose Down
ALTER TABLE payments DROP COLUMN dispute;
