-- +goose Up

-- The reconciler reads the rows dispatched within a window of time
-- (and prune the ones older than PRUNE_AFTER): this keeps each pass to
-- that window instead of every dispatched row.
CREATE INDEX outbox_messages_dispatched_at_idx ON outbox_messages (dispatched_at) WHERE status = 'dispatched';

-- +goose Down
DROP INDEX outbox_messages_dispatched_at_idx;
