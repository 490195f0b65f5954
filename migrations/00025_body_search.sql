-- +goose Up

-- Search by a JSON path = value over kept bodies (docs/admin.md#search):
-- a second copy of each kept body that is a JSON object, as jsonb, so
-- that `body_json @> '{"data":{"object":{"id":"pi_123"}}}'` finds its
-- deliveries through a GIN index instead of reading every body. It is
-- written with the body and cleared with it by maintenance; the partial
-- index holds only the rows that still have one (jsonb_path_ops: smaller
-- and faster than the default, and containment is all it is asked).
-- Deliveries kept before this migration have none: they age out within
-- DELIVERY_BODY_RETENTION.
ALTER TABLE callback_deliveries ADD COLUMN body_json jsonb;
CREATE INDEX callback_deliveries_body_json_idx ON callback_deliveries
    USING gin (body_json jsonb_path_ops) WHERE body_json IS NOT NULL;

-- +goose Down
DROP INDEX callback_deliveries_body_json_idx;
ALTER TABLE callback_deliveries DROP COLUMN body_json;
