WITH done AS (
    UPDATE payment_callbacks SET status = $1, result = $2, response_code = $3, processed_at = $4
    WHERE id = $5 RETURNING id
)
INSERT INTO callback_deliveries (callback_id, provider, received_at, outcome, response_code, duration_ms,
                                 remote_addr, request_id, trace_id, note, headers, body, body_json, body_hash)
SELECT id, $6, $7, $8, $3, $9, $10, $11, $12, $13, $14::jsonb, $15, $16::jsonb, $17 FROM done
