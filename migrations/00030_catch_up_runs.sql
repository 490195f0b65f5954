-- +goose Up

-- Catch-up runs (docs/operations.md#catching-up-after-an-outage): each
-- time Sekali asks the gateways what it may have missed, since when, what
-- each gateway answered (found) and what of it changed something
-- (applied). The last run's start is where the next one begins.
CREATE TABLE catch_up_runs (
    id          bigserial PRIMARY KEY,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    since       timestamptz NOT NULL CHECK (since <= started_at),
    -- command (sekali catch-up) or job (CATCH_UP_EVERY)
    trigger     text NOT NULL CHECK (trigger IN ('command', 'job')),
    -- one object per gateway asked: provider, asked, found, applied, error
    gateways    jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(gateways) = 'array'),
    error       text NOT NULL DEFAULT '' CHECK (length(error) <= 2000)
);
-- The console lists the newest; the next run starts from the last one.
CREATE INDEX catch_up_runs_started_idx ON catch_up_runs (started_at DESC);

-- +goose Down
DROP TABLE catch_up_runs;
