-- +goose Up

-- Without SMTP_URL an email is written to the log and sent to no one;
-- its row still ends "sent" (the job is done, the audit counts it), and
-- logged says that it went to the log, so that no page says it was sent.
ALTER TABLE outbound_emails ADD COLUMN logged boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE outbound_emails DROP COLUMN logged;
