-- +goose Up

-- The admin who asked for a catch-up on the console: the worker runs it
-- (trigger job), and the console names who pressed the button. Empty
-- for a scheduled run and for `sekali catch-up`.
ALTER TABLE catch_up_runs
    ADD COLUMN asked_by text NOT NULL DEFAULT '' CHECK (length(asked_by) <= 254);

-- +goose Down
ALTER TABLE catch_up_runs DROP COLUMN asked_by;
