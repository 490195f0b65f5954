-- +goose Up

-- The console's search (docs/admin.md#search): a gateway's transaction
-- id or reference, and a request id, each an equality on one column, so
-- that a search costs what a filtered page does at millions of rows.
CREATE INDEX payment_callbacks_transaction_id_idx ON payment_callbacks (transaction_id, id);
CREATE INDEX callback_deliveries_request_id_idx ON callback_deliveries (request_id, id);
-- payments_provider_provider_reference_key leads with the provider; the
-- search names only the reference.
CREATE INDEX payments_provider_reference_idx ON payments (provider_reference);

-- +goose Down
DROP INDEX payments_provider_reference_idx;
DROP INDEX callback_deliveries_request_id_idx;
DROP INDEX payment_callbacks_transaction_id_idx;
