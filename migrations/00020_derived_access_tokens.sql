-- +goose Up

-- An order's access token is derived now — HMAC(ORDER_TOKEN_SECRET, id,
-- nonce) — so that a replay of its creation can show it again without
-- any copy of it being kept. The nonce is random per order: the secret
-- alone derives nothing (order ids are not secret), nor does the
-- database alone. Orders from before keep their random tokens and have
-- no nonce.
ALTER TABLE orders ADD COLUMN access_token_nonce text NOT NULL DEFAULT ''
    CONSTRAINT orders_access_token_nonce_bound CHECK (length(access_token_nonce) <= 64);

-- An order's answer under an Idempotency-Key was stored with its token,
-- and replayed with it to whoever sent the same key and body. Answers
-- are stored without it now; this removes the tokens of those stored
-- before (a replay of those orders' creation answers without one). The
-- answer was json.Marshal's, the token its last member.
UPDATE api_idempotency_keys
SET response_body = regexp_replace(response_body, ',"access_token":"[A-Za-z0-9_-]*"', '', 'g')
WHERE scope IN ('orders.create', 'shop.checkout') AND response_body LIKE '%"access_token":%';

-- +goose Down
-- The tokens removed from the stored answers are gone for good, as they
-- should be.
ALTER TABLE orders DROP COLUMN access_token_nonce;
