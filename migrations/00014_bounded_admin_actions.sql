-- +goose Up

-- The admin action log is written by strangers too (a refused log-in is
-- an action), so it is bounded: every field has a length, and refused
-- log-ins are one row per client address and 15-minute window, with a
-- count, instead of one row each. It is pruned after PRUNE_AFTER.
UPDATE admin_actions SET admin_email = left(admin_email, 254), action = left(action, 64), target = left(target, 255),
    detail = left(detail, 2000), remote_addr = left(remote_addr, 255)
WHERE length(admin_email) > 254 OR length(action) > 64 OR length(target) > 255 OR length(detail) > 2000 OR length(remote_addr) > 255;
ALTER TABLE admin_actions
    ADD CONSTRAINT admin_actions_bounds CHECK (length(admin_email) <= 254 AND length(action) <= 64 AND length(target) <= 255
                                               AND length(detail) <= 2000 AND length(remote_addr) <= 255),
    ADD COLUMN count integer NOT NULL DEFAULT 1 CONSTRAINT admin_actions_count_check CHECK (count > 0),
    ADD COLUMN window_start timestamptz;
CREATE UNIQUE INDEX admin_actions_refused_login_window ON admin_actions (remote_addr, window_start) WHERE window_start IS NOT NULL;
CREATE INDEX admin_actions_created_at_idx ON admin_actions (created_at);
UPDATE admin_login_failures SET email = left(email, 254), remote_addr = left(remote_addr, 254)
WHERE length(email) > 254 OR length(remote_addr) > 254;
ALTER TABLE admin_login_failures ADD CONSTRAINT admin_login_failures_bounds CHECK (length(email) <= 254 AND length(remote_addr) <= 254);

-- +goose Down
ALTER TABLE admin_login_failures DROP CONSTRAINT admin_login_failures_bounds;
DROP INDEX admin_actions_created_at_idx;
DROP INDEX admin_actions_refused_login_window;
ALTER TABLE admin_actions DROP CONSTRAINT admin_actions_bounds, DROP COLUMN count, DROP COLUMN window_start;
