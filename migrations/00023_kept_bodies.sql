-- +goose Up

-- A delivery's body and headers, kept for DELIVERY_BODY_RETENTION
-- (docs/admin.md#kept-deliveries) so that an operator can see what a
-- gateway sent: a conflict's two bodies side by side. Headers are stored
-- with their secrets redacted; the body as received. Maintenance clears
-- both once they are older than the retention, and a partial index finds
-- those rows without reading the rest.
ALTER TABLE callback_deliveries ADD COLUMN headers jsonb, ADD COLUMN body bytea;
CREATE INDEX callback_deliveries_kept_idx ON callback_deliveries (received_at) WHERE body IS NOT NULL;

-- +goose Down
DROP INDEX callback_deliveries_kept_idx;
ALTER TABLE callback_deliveries DROP COLUMN body, DROP COLUMN headers;
