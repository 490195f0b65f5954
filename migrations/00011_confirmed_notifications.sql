-- +goose Up

-- A notification that the gateway's status API does not confirm (Midtrans
-- signs three fields of its body, so the others can be changed) changes
-- nothing of its own: its delivery is "unconfirmed", and its note says
-- what the notification and the API said.
ALTER TABLE callback_deliveries ADD COLUMN note text NOT NULL DEFAULT ''
    CONSTRAINT callback_deliveries_note_bound CHECK (length(note) <= 1000);
ALTER TABLE callback_deliveries DROP CONSTRAINT callback_deliveries_outcome_check;
ALTER TABLE callback_deliveries ADD CONSTRAINT callback_deliveries_outcome_check
    CHECK (outcome IN ('processed', 'stale', 'duplicate', 'conflict', 'rejected', 'ignored', 'unconfirmed',
                       'invalid_signature', 'invalid_payload', 'missing_field',
                       'too_large', 'unsupported_media_type', 'error'));

-- +goose Down
DELETE FROM callback_deliveries WHERE outcome = 'unconfirmed';
ALTER TABLE callback_deliveries DROP CONSTRAINT callback_deliveries_outcome_check;
ALTER TABLE callback_deliveries ADD CONSTRAINT callback_deliveries_outcome_check
    CHECK (outcome IN ('processed', 'stale', 'duplicate', 'conflict', 'rejected', 'ignored',
                       'invalid_signature', 'invalid_payload', 'missing_field',
                       'too_large', 'unsupported_media_type', 'error'));
ALTER TABLE callback_deliveries DROP COLUMN note;
