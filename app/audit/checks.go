package audit

// baseChecks are the invariants that hold without the jobs; jobChecks follow
// them. IDs run 1, 2, 3, … in the order the checks run and are printed,
// jobChecks continuing the count; docs/README.md#the-integrity-audit lists
// them by the same numbers. Each query returns one row per violation: a
// line for people and a reference to the row at fault (order:ID,
// callback:ID, product:SKU, job:KEY or invoices:YEAR), which the admin
// console turns into a link. Any row a query returns is a bug.
var baseChecks = []Check{
	{
		ID: 1, Name: "stock",
		Description: "no negative stock; every product's movements add up to its stock",
		Query: `
SELECT format('product %s has negative stock %s', sku, stock), 'product:' || sku FROM products WHERE stock < 0
UNION ALL
SELECT format('product %s has stock %s but its movements add up to %s', p.sku, p.stock, coalesce(m.total, 0)), 'product:' || p.sku
FROM products p
LEFT JOIN (SELECT sku, sum(CASE WHEN kind IN ('reserve', 'rereserve') THEN -qty ELSE qty END) AS total
           FROM stock_movements GROUP BY sku) m ON m.sku = p.sku
WHERE p.stock <> coalesce(m.total, 0)`,
	},
	{
		ID: 2, Name: "reservations",
		Description: "per order item, reserve + rereserve - release is 1 while the order holds stock (pending, paid, partially_refunded, refunded), else 0; no kind twice",
		Query: `
WITH counts AS (
    SELECT i.order_id, i.sku, o.status,
           count(m.id) FILTER (WHERE m.kind = 'reserve')   AS reserve,
           count(m.id) FILTER (WHERE m.kind = 'rereserve') AS rereserve,
           count(m.id) FILTER (WHERE m.kind = 'release')   AS release
    FROM order_items i
    JOIN orders o ON o.id = i.order_id
    LEFT JOIN stock_movements m ON m.order_id = i.order_id AND m.sku = i.sku
    GROUP BY i.order_id, i.sku, o.status)
SELECT format('order %s (%s) item %s: reserve %s, rereserve %s, release %s', order_id, status, sku, reserve, rereserve, release), 'order:' || order_id
FROM counts
WHERE reserve > 1 OR rereserve > 1 OR release > 1
   OR reserve + rereserve - release <> CASE WHEN status IN ('pending', 'paid', 'partially_refunded', 'refunded') THEN 1 ELSE 0 END
UNION ALL
SELECT format('order %s item %s: %s movement of %s units, the item has %s', m.order_id, m.sku, m.kind, m.qty, i.qty), 'order:' || m.order_id
FROM stock_movements m JOIN order_items i ON i.order_id = m.order_id AND i.sku = m.sku
WHERE m.qty <> i.qty
UNION ALL
SELECT format('order %s: %s movement for %s, which is not one of its items', m.order_id, m.kind, m.sku), 'order:' || m.order_id
FROM stock_movements m LEFT JOIN order_items i ON i.order_id = m.order_id AND i.sku = m.sku
WHERE m.order_id IS NOT NULL AND i.id IS NULL`,
	},
	{
		ID: 3, Name: "payments",
		Description: "every paid or partially refunded order has exactly one succeeded payment of its amount and currency, refunded not at all or in part as its status says; no other order has one; every refunded order has a payment refunded in full",
		Query: `
SELECT format('%s order %s has %s succeeded payments', o.status, o.id, count(p.id)), 'order:' || o.id
FROM orders o LEFT JOIN payments p ON p.order_id = o.id AND p.status = 'succeeded'
WHERE o.status IN ('paid', 'partially_refunded')
GROUP BY o.id HAVING count(p.id) <> 1
UNION ALL
SELECT format('%s order %s is %s %s but its payment %s is %s %s', o.status, o.id, o.total_amount, o.currency, p.provider_reference, p.amount, p.currency), 'order:' || o.id
FROM orders o JOIN payments p ON p.order_id = o.id AND p.status = 'succeeded'
WHERE o.status IN ('paid', 'partially_refunded') AND (p.amount <> o.total_amount OR p.currency <> o.currency)
UNION ALL
SELECT format('%s order %s has payment %s with %s of %s refunded', o.status, o.id, p.provider_reference, p.refunded_amount, p.amount), 'order:' || o.id
FROM orders o JOIN payments p ON p.order_id = o.id AND p.status = 'succeeded'
WHERE (o.status = 'paid' AND p.refunded_amount <> 0)
   OR (o.status = 'partially_refunded' AND NOT (p.refunded_amount > 0 AND p.refunded_amount < p.amount))
UNION ALL
SELECT format('order %s is %s but payment %s succeeded', o.id, o.status, p.provider_reference), 'order:' || o.id
FROM orders o JOIN payments p ON p.order_id = o.id AND p.status = 'succeeded'
WHERE o.status NOT IN ('paid', 'partially_refunded')
UNION ALL
SELECT format('refunded order %s has no refunded payment', o.id), 'order:' || o.id
FROM orders o
WHERE o.status = 'refunded' AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id AND p.status = 'refunded')`,
	},
	{
		ID: 4, Name: "callbacks",
		Description: "every processed callback has exactly one delivery that applied it (processed or stale)",
		Query: `
SELECT format('callback %s (%s %s) has %s applying deliveries', c.id, c.provider, c.idempotency_key, count(d.id)), 'callback:' || c.id
FROM payment_callbacks c
LEFT JOIN callback_deliveries d ON d.callback_id = c.id AND d.outcome IN ('processed', 'stale')
WHERE c.status = 'processed'
GROUP BY c.id HAVING count(d.id) <> 1`,
	},
	{
		ID: 5, Name: "refunds",
		Description: "refunds never exceed their payment: each payment's pending and succeeded refunds add up to its refunded amount (no failed, canceled or superseded refund counts), at most what it took, all of it exactly when it is refunded, and a refunded payment remembers the status it returns to; a refund is in its payment's currency and order",
		Query: `
SELECT format('payment %s has %s refunded but its pending and succeeded refunds add up to %s', p.provider_reference, p.refunded_amount, coalesce(r.total, 0)), 'order:' || p.order_id
FROM payments p LEFT JOIN (SELECT payment_id, sum(amount) AS total FROM refunds
                           WHERE status IN ('pending', 'succeeded') GROUP BY payment_id) r ON r.payment_id = p.id
WHERE p.refunded_amount <> coalesce(r.total, 0)
UNION ALL
SELECT format('payment %s (%s, refunded from %L) has %s of %s refunded', provider_reference, status, refunded_from, refunded_amount, amount), 'order:' || order_id
FROM payments
WHERE refunded_amount > amount
   OR (status = 'refunded' AND (refunded_amount <> amount OR refunded_from = ''))
   OR (status <> 'refunded' AND refunded_from <> '')
   OR (status IN ('succeeded', 'refund_required') AND refunded_amount = amount AND amount > 0)
   OR (refunded_amount > 0 AND status NOT IN ('succeeded', 'refund_required', 'refunded'))
UNION ALL
SELECT format('refund %s of payment %s is %s of order %s, the payment %s of order %s', r.refund_key, p.provider_reference, r.currency, r.order_id, p.currency, p.order_id), 'order:' || p.order_id
FROM refunds r JOIN payments p ON p.id = r.payment_id
WHERE r.currency <> p.currency OR r.order_id <> p.order_id OR r.provider <> p.provider`,
	},
}

// jobChecks are the invariants that need the jobs (invoices, emails, job
// rows). They hold only once the work of every paid order has run: a
// drained run judges every paid order, a live run leaves out the orders
// paid after @settled_before, whose jobs may still be running.
var jobChecks = []Check{
	{
		ID: 6, Name: "invoices",
		Description: "every paid order has exactly one invoice of its amount, unless an operator discarded its invoice job; none for orders never paid; numbers gapless per year",
		Query: `
SELECT format('paid order %s has %s invoices', o.id, count(i.id)), 'order:' || o.id
FROM orders o LEFT JOIN invoices i ON i.order_id = o.id
WHERE o.status = 'paid' AND o.paid_at <= @settled_before
  AND NOT EXISTS (SELECT 1 FROM job_executions j WHERE j.idempotency_key = 'invoice:generate:' || o.id AND j.status = 'discarded')
GROUP BY o.id HAVING count(i.id) <> 1
UNION ALL
SELECT format('order %s is %s but has invoice %s', o.id, o.status, i.number), 'order:' || o.id
FROM invoices i JOIN orders o ON o.id = i.order_id
WHERE o.status NOT IN ('paid', 'partially_refunded', 'refunded')
UNION ALL
SELECT format('invoice %s is %s %s, its order %s is %s %s', i.number, i.amount, i.currency, o.id, o.total_amount, o.currency), 'order:' || o.id
FROM invoices i JOIN orders o ON o.id = i.order_id
WHERE i.amount <> o.total_amount OR i.currency <> o.currency
UNION ALL
SELECT format('invoice numbers of %s have gaps: %s invoices, highest number %s', year, count(*), max(sequence)), 'invoices:' || year
FROM invoices GROUP BY year HAVING max(sequence) <> count(*)
UNION ALL
SELECT format('invoice %s is not INV-%s-%s', number, year, lpad(sequence::text, 6, '0')), 'order:' || order_id
FROM invoices WHERE number <> format('INV-%s-%s', year, lpad(sequence::text, 6, '0'))
UNION ALL
SELECT format('the invoice counter of %s is at %s, the highest invoice is %s', c.year, c.last, coalesce(max(i.sequence), 0)), 'invoices:' || c.year
FROM invoice_counters c LEFT JOIN invoices i ON i.year = c.year
GROUP BY c.year, c.last HAVING c.last <> coalesce(max(i.sequence), 0)`,
	},
	{
		ID: 7, Name: "emails",
		Description: "every paid order has exactly one order_paid email, and it is sent, unless an operator discarded its email job",
		Query: `
SELECT format('paid order %s has %s order_paid emails, %s sent', o.id, count(e.id), count(e.id) FILTER (WHERE e.status = 'sent')), 'order:' || o.id
FROM orders o LEFT JOIN outbound_emails e ON e.key = 'order_paid:' || o.id
WHERE o.status = 'paid' AND o.paid_at <= @settled_before
  AND NOT EXISTS (SELECT 1 FROM job_executions j WHERE j.idempotency_key = 'email:send:order_paid:' || o.id AND j.status = 'discarded')
GROUP BY o.id HAVING count(e.id) <> 1 OR count(e.id) FILTER (WHERE e.status = 'sent') <> 1`,
	},
	{
		ID: 8, Name: "jobs",
		Description: "no job is processing more than a minute past its lease; every succeeded invoice or email job has its effect, unless what its email tells was no longer true when it ran and never can be again: a refund that failed before its email went out, a refund failure whose customer was never told of the refund, an order cancelled or expired that a late payment took back",
		Query: `
SELECT format('job %s has been processing %s past its lease', idempotency_key, date_trunc('second', now() - locked_until)), 'job:' || idempotency_key
FROM job_executions
WHERE status = 'processing' AND locked_until < now() - interval '1 minute'
UNION ALL
SELECT format('job %s succeeded but order %s has no invoice', j.idempotency_key, j.business_key), 'job:' || j.idempotency_key
FROM job_executions j
WHERE j.status = 'succeeded' AND j.idempotency_key LIKE 'invoice:generate:%'
  AND NOT EXISTS (SELECT 1 FROM invoices i WHERE i.order_id = j.business_key)
UNION ALL
SELECT format('job %s succeeded but its email is not sent', j.idempotency_key), 'job:' || j.idempotency_key
FROM job_executions j
WHERE j.status = 'succeeded' AND j.idempotency_key LIKE 'email:send:%'
  -- e.key = the job key without its prefix, so the lookup uses the unique index on key
  AND NOT EXISTS (SELECT 1 FROM outbound_emails e WHERE e.key = substr(j.idempotency_key, length('email:send:') + 1) AND e.status = 'sent')
  -- The job found nothing true to tell, and rightly sent nothing. Each
  -- case is final, so it can never have been true when the job ran:
  AND NOT CASE split_part(j.idempotency_key, ':', 3)
    -- a refund that succeeded and then failed before its email went out;
    WHEN 'refund_succeeded' THEN EXISTS (
      SELECT 1 FROM refunds r
      WHERE r.id = substring(j.idempotency_key FROM ':([0-9]{1,18})$')::bigint
        AND r.order_id = j.business_key AND r.status IN ('failed', 'canceled'))
    -- a refund that failed after it succeeded, whose customer was never
    -- told it had: its email was not sent, and never will be (a failed
    -- refund's email is not tried);
    WHEN 'refund_failed' THEN NOT EXISTS (
      SELECT 1 FROM outbound_emails s
      WHERE s.key = 'refund_succeeded:' || substr(j.idempotency_key, length('email:send:refund_failed:') + 1) AND s.status = 'sent')
    -- an order cancelled or expired that a late payment took back: it
    -- never returns to either state.
    WHEN 'order_cancelled' THEN EXISTS (SELECT 1 FROM orders o WHERE o.id = j.business_key AND o.status <> 'cancelled')
    WHEN 'order_expired' THEN EXISTS (SELECT 1 FROM orders o WHERE o.id = j.business_key AND o.status <> 'expired')
    ELSE false
  END`,
	},
	{
		ID: 9, Name: "gateway refunds",
		Description: "refunds Sekali asked for never exceed their payment; each done one was answered with the amount and currency asked and is one refund at the gateway, applied to its payment and counted (one the gateway failed after accepting it is failed); one answered otherwise is in conflict, its answer not applied; no refund job succeeded with its refund still open",
		Query: `
-- A refund in conflict counts what the gateway's notification of it
-- counted, once it has, or else what it asked (held back meanwhile).
SELECT format('payment %s of %s: the refunds asked of the gateway add up to %s', p.provider_reference, p.amount, g.asked), 'order:' || p.order_id
FROM payments p JOIN (SELECT g.payment_id, sum(CASE WHEN g.phase = 'conflict' THEN coalesce(c.counted, g.amount) ELSE g.amount END) AS asked
                      FROM gateway_requests g
                      LEFT JOIN LATERAL (SELECT sum(r.amount) AS counted FROM refunds r
                                         WHERE r.payment_id = g.payment_id AND r.status IN ('pending', 'succeeded')
                                           AND r.refund_key IN (g.idempotency_key, g.provider_object_id)) c ON g.phase = 'conflict'
                      WHERE g.kind = 'refund' AND g.phase NOT IN ('failed', 'declined', 'discarded') GROUP BY g.payment_id) g ON g.payment_id = p.id
WHERE g.asked > p.amount
UNION ALL
-- The integrity check of the gateway's answer held: a done refund was
-- answered as asked (where the answer states it), and one in conflict
-- was not, and applied nothing — its answer's event (keyed
-- refund:{key}, refunds.Service) was never processed.
SELECT format('refund %s at %s is done, applied as the gateway''s answer of %s %s, not the %s %s asked', idempotency_key, provider,
              answered_amount, coalesce(nullif(answered_currency, ''), currency), amount, currency), 'order:' || order_id
FROM gateway_requests
WHERE kind = 'refund' AND phase = 'done' AND answered_amount IS NOT NULL
  AND (answered_amount <> amount OR answered_currency NOT IN ('', currency))
UNION ALL
SELECT format('refund %s at %s is in conflict, but the gateway answered the %s %s asked', idempotency_key, provider, amount, currency), 'order:' || order_id
FROM gateway_requests
WHERE kind = 'refund' AND phase = 'conflict' AND answered_amount = amount AND answered_currency IN ('', currency)
UNION ALL
SELECT format('refund %s at %s is in conflict, yet its answer was applied (callback %s)', g.idempotency_key, g.provider, c.id), 'order:' || g.order_id
FROM gateway_requests g JOIN payment_callbacks c ON c.provider = g.provider AND c.idempotency_key = 'refund:' || g.idempotency_key
WHERE g.kind = 'refund' AND g.phase = 'conflict' AND c.status = 'processed'
UNION ALL
SELECT format('payment %s has %s refunded, less than the %s its done refunds took at the gateway', p.provider_reference, p.refunded_amount, g.done), 'order:' || p.order_id
FROM payments p JOIN (SELECT payment_id, sum(amount) AS done FROM gateway_requests
                      WHERE kind = 'refund' AND phase = 'done' GROUP BY payment_id) g ON g.payment_id = p.id
WHERE p.refunded_amount < g.done
UNION ALL
SELECT format('gateway refund %s of %s is the answer of %s refunds done or in conflict', provider_object_id, provider, count(*)), 'order:' || min(order_id)
FROM gateway_requests WHERE kind = 'refund' AND phase IN ('done', 'conflict')
GROUP BY provider, provider_object_id HAVING count(*) > 1
UNION ALL
-- The done refund's own row is there and counts (or, for a refund
-- applied before the gateway named it, a charge total that stands for
-- it): a refund the gateway failed after accepting it is failed here too.
SELECT format('refund %s is done at %s but no counted refund of its payment is named %s or %s', g.idempotency_key, g.provider, g.idempotency_key, g.provider_object_id), 'order:' || g.order_id
FROM gateway_requests g
WHERE g.kind = 'refund' AND g.phase = 'done'
  AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.payment_id = g.payment_id AND r.status IN ('pending', 'succeeded')
                  AND (r.refund_key IN (g.idempotency_key, g.provider_object_id) OR r.refund_key LIKE '%:refunded:%'))
UNION ALL
SELECT format('job %s succeeded but its refund is still %s', j.idempotency_key, g.phase), 'job:' || j.idempotency_key
FROM job_executions j JOIN gateway_requests g ON j.idempotency_key = 'refund:send:' || g.id
WHERE j.status = 'succeeded' AND g.phase IN ('planned', 'sent')`,
	},
	{
		ID: 10, Name: "unknown outcomes",
		Description: "no call to a gateway is left unknown past the end of its gateway's schedule: each page or refund sent whose answer was lost, and each refund the gateway accepted and has not settled, is known (done or failed) by then, or its order needs it no more",
		Query: `
WITH ends AS (SELECT key AS provider, value::float8 AS secs FROM jsonb_each_text(CAST(@ends AS jsonb))),
unknown AS (
    SELECT g.*, 'sent, its answer unknown' AS what, coalesce(g.unknown_since, g.updated_at) AS since
    FROM gateway_requests g
    WHERE g.phase = 'sent'
      AND (g.kind <> 'create_payment' OR EXISTS (SELECT 1 FROM orders o WHERE o.id = g.order_id AND o.status = 'pending'))
    UNION ALL
    SELECT g.*, 'pending at the gateway', coalesce(g.unknown_since, g.done_at, g.updated_at)
    FROM refunds r JOIN gateway_requests g ON g.order_id = r.order_id AND g.provider = r.provider AND g.payment_id = r.payment_id
         AND g.kind = 'refund' AND g.phase = 'done' AND r.refund_key IN (g.provider_object_id, g.idempotency_key)
    WHERE r.status = 'pending')
SELECT format('%s %s %s (key %s) has been %s since %s, past the end of its schedule (%s): asked %s times',
              u.provider, replace(u.kind, '_', ' '), u.id, u.idempotency_key, u.what,
              to_char(u.since AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS"Z"'),
              make_interval(secs => coalesce(e.secs, @default_end)), u.asks), 'order:' || u.order_id
FROM unknown u LEFT JOIN ends e ON e.provider = u.provider
WHERE u.since < now() - make_interval(secs => coalesce(e.secs, @default_end))`,
	},
}

// conflictsQuery lists the calls a gateway answered with another amount
// or currency than asked (phase conflict), newest first: shown with a
// report as information, never as a violation — nothing of them was
// applied, and the books hold — but each waits for an operator to
// settle it in the gateway's dashboard, and a green audit must not hide
// it.
const conflictsQuery = `
SELECT format('%s %s of order %s at %s: asked %s %s, the gateway answered %s %s (%s); %s', kind, idempotency_key, order_id, provider,
              amount, currency, answered_amount, coalesce(nullif(answered_currency, ''), currency), provider_object_id, last_error) AS line,
       'order:' || order_id AS ref
FROM gateway_requests WHERE phase = 'conflict'
ORDER BY updated_at DESC, id DESC`

// discardedQuery lists the jobs operators discarded, newest first: shown
// with a report as information, never as a violation — the work they
// stood for will not happen, and someone decided so.
const discardedQuery = `
SELECT format('job %s discarded by %s at %s: %s', idempotency_key, coalesce(nullif(discarded_by, ''), 'an operator'),
              to_char(discarded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS"Z"'), discard_reason) AS line,
       'job:' || idempotency_key AS ref
FROM job_executions WHERE status = 'discarded'
ORDER BY discarded_at DESC, id DESC`
