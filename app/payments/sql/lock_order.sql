SELECT o.*, p.id AS charge_id, p.order_id AS charge_order_id, p.status AS charge_status,
       p.amount AS charge_amount, p.refunded_amount AS charge_refunded_amount, p.currency AS charge_currency,
       p.dispute AS charge_dispute, p.disputed_amount AS charge_disputed_amount
FROM orders o LEFT JOIN payments p ON p.provider = $1 AND p.provider_reference = $2
WHERE o.id = $3
FOR UPDATE OF o
