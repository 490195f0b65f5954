-- +goose Up

-- An operator acknowledges an alert on the dashboard (docs/admin.md):
-- who and when, once. An acknowledged alert leaves the dashboard's list;
-- its webhook is sent (or not) as before. The dashboard reads the newest
-- alerts not acknowledged, through a partial index of them.
ALTER TABLE alerts
    ADD COLUMN acknowledged_at timestamptz,
    ADD COLUMN acknowledged_by text NOT NULL DEFAULT '' CHECK (length(acknowledged_by) <= 320),
    ADD CONSTRAINT alerts_acknowledged_check CHECK ((acknowledged_at IS NULL) = (acknowledged_by = ''));
CREATE INDEX alerts_open_created_idx ON alerts (created_at DESC) WHERE acknowledged_at IS NULL;

-- An owner's correction of an order's total is an entry of the action
-- log ('correct total', target 'order {id}'); the order's story reads
-- them by target, through an index of those entries alone.
CREATE INDEX admin_actions_correct_total_idx ON admin_actions (target) WHERE action = 'correct total';

-- +goose Down
DROP INDEX admin_actions_correct_total_idx;
DROP INDEX alerts_open_created_idx;
ALTER TABLE alerts DROP CONSTRAINT alerts_acknowledged_check,
    DROP COLUMN acknowledged_by, DROP COLUMN acknowledged_at;
