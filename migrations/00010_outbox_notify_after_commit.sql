-- +goose Up
-- The relay is woken by a NOTIFY that the writer sends after its commit
-- (app/outbox.Notifier), no longer by this trigger inside the writing
-- transaction: a transaction that notifies holds the database's
-- notification-queue lock from its commit until the commit is flushed,
-- so every paying callback's commit queued behind the one before
-- (docs/performance.md).
DROP TRIGGER outbox_messages_notify ON outbox_messages;
DROP FUNCTION outbox_notify();

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('outbox_messages', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_messages_notify AFTER INSERT ON outbox_messages
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
