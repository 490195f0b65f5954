INSERT INTO payments (provider, provider_reference, order_id, amount, currency, status, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
ON CONFLICT DO NOTHING
