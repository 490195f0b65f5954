WITH moved AS (
    UPDATE orders SET status = $1, updated_at = $2, paid_at = coalesce($3, paid_at)
    WHERE id = $4 AND status = ANY($5::text[])
    RETURNING id
)
INSERT INTO order_transitions (order_id, from_status, to_status, cause, callback_id, created_at)
VALUES ((SELECT id FROM moved), $6::text, $1::text, $7::text, $8::bigint, $2::timestamptz)
