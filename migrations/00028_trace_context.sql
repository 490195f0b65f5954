-- +goose Up

-- Tracing (docs/operations.md#tracing): an outbox row carries the W3C
-- traceparent of the transaction that wrote it, so the relay's and the
-- worker's spans join the trace of the callback that paid the order;
-- NULL when tracing is off. A delivery row keeps the id of its trace for
-- the console ('' when tracing is off).
ALTER TABLE outbox_messages
    ADD COLUMN traceparent text CHECK (length(traceparent) <= 128);
ALTER TABLE callback_deliveries
    ADD COLUMN trace_id text NOT NULL DEFAULT '' CHECK (trace_id ~ '^([0-9a-f]{32})?$');

-- +goose Down
ALTER TABLE callback_deliveries DROP COLUMN trace_id;
ALTER TABLE outbox_messages DROP COLUMN traceparent;
