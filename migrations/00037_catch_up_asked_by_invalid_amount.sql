-- +goose Up

-- The admin who asked for a catch-up on the console: the worker runs it
-- (trigger job), and the console names who pressed the button. Empty
-- for a scheduled run and for `sekali catch-up`.
ALTER TABLE catch_up_runs
    ADD COLUMN asked_by text NOT NULL DEFAULT '' CHECK (length(asked_by) <= 254);

-- A callback whose amount is written as no amount is (an exponent, a
-- sign, a fraction its currency has not) is refused as invalid_request:
-- the field is there, its value is malformed (missing_field is for a
-- field that is not).
ALTER TABLE callback_deliveries DROP CONSTRAINT callback_deliveries_outcome_check;
ALTER TABLE callback_deliveries ADD CONSTRAINT callback_deliveries_outcome_check
    CHECK (outcome IN ('processed', 'stale', 'duplicate', 'conflict', 'rejected', 'ignored', 'unconfirmed',
                       'invalid_signature', 'invalid_payload', 'missing_field', 'invalid_request',
                       'too_large', 'unsupported_media_type', 'error'));

-- +goose Down
UPDATE callback_deliveries SET outcome = 'missing_field' WHERE outcome = 'invalid_request';
ALTER TABLE callback_deliveries DROP CONSTRAINT callback_deliveries_outcome_check;
ALTER TABLE callback_deliveries ADD CONSTRAINT callback_deliveries_outcome_check
    CHECK (outcome IN ('processed', 'stale', 'duplicate', 'conflict', 'rejected', 'ignored', 'unconfirmed',
                       'invalid_signature', 'invalid_payload', 'missing_field',
                       'too_large', 'unsupported_media_type', 'error'));
ALTER TABLE catch_up_runs DROP COLUMN asked_by;
