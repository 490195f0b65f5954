-- +goose Up

-- An order is read and cancelled with its access token, returned once at
-- creation; only its SHA-256 is stored. Orders from before have none
-- (the empty hash matches no token): the admin token still reads them.
ALTER TABLE orders ADD COLUMN access_token_hash text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE orders DROP COLUMN access_token_hash;
