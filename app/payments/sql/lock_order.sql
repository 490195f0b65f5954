SELECT o.id, o.status, o.total_amount, o.currency,
       p.id, p.order_id, p.status, p.amount, p.refunded_amount, p.currency, p.dispute, p.disputed_amount
FROM orders o LEFT JOIN payments p ON p.provider = $1 AND p.provider_reference = $2
WHERE o.id = $3
FOR UPDATE OF o
