INSERT INTO payments (provider, provider_reference, order_id, amount, currency, status, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
ON CONFLICT (provider, provider_reference) DO UPDATE
SET status = excluded.status, amount = excluded.amount, currency = excluded.currency, updated_at = excluded.updated_at
WHERE payments.order_id = excluded.order_id AND payments.status = ANY($8::text[])
