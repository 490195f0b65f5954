-- +goose Up

-- sessions_from ends an admin's sessions without finding them in the
-- session store: a console session opened before it opens nothing (the
-- session keeps when it logged in). Disabling an admin and changing a
-- password set it, so that enabling the admin again does not bring back
-- a session of before, and a password changed because it leaked ends
-- the sessions opened with it. NULL: no session ended so.
ALTER TABLE admin_users ADD COLUMN sessions_from timestamptz;

-- An audit run that found something wrong is neither refused nor an
-- error: it ran, and it is red.
ALTER TABLE admin_actions DROP CONSTRAINT admin_actions_result_check,
    ADD CONSTRAINT admin_actions_result_check CHECK (result IN ('ok', 'noop', 'refused', 'error', 'red'));
UPDATE admin_actions SET result = 'red' WHERE action = 'run audit' AND result = 'refused';

-- +goose Down
UPDATE admin_actions SET result = 'refused' WHERE result = 'red';
ALTER TABLE admin_actions DROP CONSTRAINT admin_actions_result_check,
    ADD CONSTRAINT admin_actions_result_check CHECK (result IN ('ok', 'noop', 'refused', 'error'));
ALTER TABLE admin_users DROP COLUMN sessions_from;
