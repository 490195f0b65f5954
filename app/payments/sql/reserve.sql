INSERT INTO payment_callbacks (provider, idempotency_key, payload_hash, order_id, transaction_id, event_status,
                               amount, currency, status, result, response_code, attempts,
                               first_received_at, last_received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, '', 0, 1, $10, $10)
ON CONFLICT DO NOTHING
RETURNING id
