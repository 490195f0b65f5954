package views

import "strings"

// HelpStep is one step of the debugging guide: a question, how to answer
// it, where in the console, and which log fields to search.
type HelpStep struct {
	Title  string
	Text   []string // paragraphs
	Links  []HelpLink
	Fields []string // structured log fields to search
}

// OperationsGuide is docs/operations.md, the alerts' runbook, which the
// help page links to: the console does not serve the docs.
const OperationsGuide = "https://github.com/sekali/sekali/blob/main/docs/operations.md"

// HelpLink is a console page that answers a step.
type HelpLink struct {
	Label, Href string
}

// Guide is the debugging guide, shown at /admin/help and kept word for
// word in docs/debugging.md (a test compares them; `make generate`
// rewrites the file).
var Guide = []HelpStep{
	{
		Title: "1. Trace the key",
		Text: []string{
			"Everything that must happen once has a key: a callback's idempotency key (the gateway's event id), a job's task id (`invoice:generate:ORD-…`, `email:send:order_paid:ORD-…`, `order:expire:ORD-…`), an order id, a client's Idempotency-Key. Start from the key you have.",
			"The order page tells the whole story on one timeline: every callback and how often it was delivered, every status change and what caused it, the stock movements, the outbox rows, each job run (attempts, fence, worker, error), the invoice and the email.",
			"In the logs, one search for a callback's `request_id` finds its delivery and the invoice and email jobs it caused: their tasks carry it, and each job line says the status it found and left (`status_before`, `status_after`). The same holds for a refund: the admin's request id (`X-Request-Id` of the console's form or the admin API's call) is on the request's own line, on every line of its `refund:send` job and on the gateway call's (`refund done`, `refund not answered yet`), each of those with the refund record's `refund_request_id` too, and on the answer's delivery row (`gateway answer`) and the task of the customer's refund email it writes.",
		},
		Links: []HelpLink{
			{"Callbacks by key prefix", "/admin/callbacks?key=evt_"},
			{"Jobs by key or order id", "/admin/jobs?key=ORD-"},
			{"Orders", "/admin/orders"},
		},
		Fields: []string{"idempotency_key", "order_id", "request_id", "refund_request_id", "external_job_id", "business_key"},
	},
	{
		Title: "2. Read the timeline: processing → commit → ack → retry",
		Text: []string{
			"A callback is applied in one transaction: the callback row, the order row lock, the effect, the outbox rows and the applying delivery's row commit together, then the gateway gets its 200. A 503 means nothing was applied and the gateway's retry is safe.",
			"A job runs behind the guard: lock, claim (attempts + 1, fence + 1, `processing` until `locked_until`), then the effect and the fenced `succeeded` in one transaction, and only then the ack. A retry after a crash shows as a second attempt with a higher fence; a delivery after success shows as `duplicate_ignored` in the log and changes nothing.",
		},
		Links: []HelpLink{
			{"Job executions", "/admin/jobs"},
			{"The queue's own view (retries, archived)", "/admin/queues"},
		},
		Fields: []string{"attempt", "worker_id", "duration_ms", "status_before", "status_after", "msg: \"job succeeded\" / \"job failed\" / \"job duplicate_ignored\" / \"job fenced\""},
	},
	{
		Title: "3. Did a lock's TTL expire?",
		Text: []string{
			"A job row that is `processing` with `locked_until` in the past has lost its worker: it died, or could not refresh its lock (`JOB_LOCK_TTL`, refreshed every third of it). The console marks it stuck; the sweeper marks it failed within a minute, and the next delivery claims it with a higher fence, so the old worker can no longer commit.",
		},
		Links: []HelpLink{
			{"Stuck jobs", "/admin/jobs?status=stuck"},
			{"Failed jobs", "/admin/jobs?status=failed"},
		},
		Fields: []string{"lock_key", "msg: \"job lock_lost\"", "msg: \"swept stuck jobs\""},
	},
	{
		Title: "4. Count the attempts",
		Text: []string{
			"A callback's attempts are its deliveries: how often the gateway sent the same event. A job's attempts are its claims by a worker. Many attempts are normal (gateways and queues deliver at least once); more than one effect is not.",
		},
		Links: []HelpLink{
			{"Deliveries of one callback: open the callback", "/admin/callbacks"},
			{"Jobs that failed", "/admin/jobs?status=failed"},
		},
		Fields: []string{"attempt", "idempotency_key"},
	},
	{
		Title: "5. Are the unique indexes there?",
		Text: []string{
			"The database is the last guard: one callback per (provider, idempotency_key), one payment per (provider, reference), one stock movement per (order, sku, kind), one invoice per order, one email per key, one job row per key, one outbox row per task id. The integrity audit checks their effects, and the test suite checks that every index exists in the migrated schema.",
		},
		Links: []HelpLink{
			{"Run the integrity audit", "/admin/audit"},
		},
		Fields: []string{"msg: \"callback duplicate\" (a save by the callback index)"},
	},
	{
		Title: "6. Where do the duplicates come from?",
		Text: []string{
			"Gateway retries after a timeout or a 5xx (many deliveries of one callback), concurrent deliveries of the same event (they wait on the callback's unique index and answer `duplicate`), a client sending the same POST again (its Idempotency-Key replays the stored answer), the queue delivering a task twice (the job row answers `duplicate_ignored`), the relay handing a task over again (the queue refuses the same task id).",
		},
		Links: []HelpLink{
			{"Duplicate deliveries", "/admin/deliveries?outcome=duplicate"},
			{"Dashboard: duplicate share", "/admin"},
		},
		Fields: []string{"provider", "idempotency_key", "request_id", "remote_addr"},
	},
	{
		Title: "7. Which status transitions happened?",
		Text: []string{
			"Every change of an order's status is a conditional UPDATE that names the states it leaves from, recorded with its cause (a callback, a customer's or an admin's cancel, the expiry job, the sweeper) in the same statement. A callback that changed nothing is `stale`: it came too late for the order's state.",
		},
		Links: []HelpLink{
			{"An order's status changes: open the order", "/admin/orders"},
			{"Stale callbacks", "/admin/callbacks?result=stale"},
		},
		Fields: []string{"status_before", "status_after", "order_id"},
	},
	{
		Title: "8. Root-cause signs",
		Text: []string{
			"`conflict`: the same event id with another body — a gateway bug or a tampered body; the first body's effect stands. A burst of `invalid_signature`: a wrong or rotated secret, or someone probing. An outbox backlog that ages: Redis or the relay is down (the work waits; nothing is lost). Archived tasks: jobs that gave up; fix the cause, then re-run them. A RED audit: a bug — every line names the row at fault.",
		},
		Links: []HelpLink{
			{"Conflicts", "/admin/callbacks?result=conflict"},
			{"Refused deliveries", "/admin/deliveries?outcome=refused"},
			{"Pending outbox rows", "/admin/outbox?status=pending"},
			{"Archived tasks", "/admin/jobs"},
			{"Audit", "/admin/audit"},
		},
		Fields: []string{"result", "reason", "outcome", "msg: \"outbox relay: will retry\""},
	},
}

// helpText renders a paragraph's `code` spans: the text between back
// quotes becomes code.
func helpText(p string) []helpSpan {
	parts := strings.Split(p, "`")
	spans := make([]helpSpan, len(parts))
	for i, s := range parts {
		spans[i] = helpSpan{Text: s, Code: i%2 == 1}
	}
	return spans
}

type helpSpan struct {
	Text string
	Code bool
}
