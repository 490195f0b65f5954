INSERT INTO outbox_messages (task_type, payload, task_id, queue, process_at, status, attempts,
                             last_error, created_at, dispatched_at, traceparent)
SELECT * FROM unnest($1::text[], $2::bytea[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::int[],
                     $8::text[], $9::timestamptz[], $10::timestamptz[], $11::text[])
ON CONFLICT DO NOTHING
