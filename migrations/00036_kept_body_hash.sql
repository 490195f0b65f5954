-- +goose Up

-- A kept body is what "apply again" and the dry run run through the
-- pipeline again, after its signature, on the row's word that the
-- signature was valid. body_hash is the HMAC-SHA256 of the body as it
-- was kept, under a key derived from ORDER_TOKEN_SECRET (never in the
-- database), written with the body and cleared with it: a body changed
-- in the database afterwards no longer matches, and is refused (409)
-- instead of applied. Nullable with no default, so adding it rewrites
-- nothing; rows kept before it have none, and are not applied again.
ALTER TABLE callback_deliveries ADD COLUMN body_hash bytea;

-- +goose Down
ALTER TABLE callback_deliveries DROP COLUMN body_hash;
