-- +goose Up

-- Operational webhooks (docs/operations.md#operational-webhooks): one row
-- per occurrence of an operational event. event_id is the webhook-id the
-- receiver dedupes on: it is derived from what caused the event (the audit
-- run that turned red, the refund that failed, the window of a burst), so
-- raising the same occurrence twice finds the row already there. The row
-- is written with its alert:send task in the outbox, in one transaction.
CREATE TABLE alerts (
    id          bigserial PRIMARY KEY,
    event_id    text NOT NULL UNIQUE CHECK (length(event_id) BETWEEN 1 AND 200),
    type        text NOT NULL CHECK (type IN ('audit.red', 'jobs.archived', 'callbacks.conflict_burst',
                                              'reconciler.resent', 'refund.failed', 'gateway.unreachable')),
    payload     jsonb NOT NULL,
    status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed', 'unsent')),
    attempts    integer NOT NULL DEFAULT 0,
    last_error  text NOT NULL DEFAULT '' CHECK (length(last_error) <= 1000),
    created_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz,
    CHECK ((status = 'sent') = (sent_at IS NOT NULL))
);
-- The dashboard's recent alerts.
CREATE INDEX alerts_created_idx ON alerts (created_at DESC);

-- +goose Down
DROP TABLE alerts;
