// Package views holds the HTML of the admin console as templ components.
// Components take plain view structs (view.go) — never a GORM model or a
// database handle — so they can be rendered and tested on their own; the
// handlers in web/ build the structs. Generated *_templ.go files are
// committed; `make generate` regenerates them.
package views

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sekali/sekali/models"
)

// Money formats an amount in minor units for people (models.Money):
// "Rp 150.000", "12.34 USD".
func Money(amount int64, currency string) string { return models.Money(amount, currency) }

// Time formats a time in UTC, to the second. The zero time is "—".
func Time(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// TimePtr is Time of an optional time.
func TimePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return Time(*t)
}

// Ago says how long before now t was: "4s ago", "3m ago", "in 2m".
func Ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	if d := now.Sub(t); d >= 0 {
		return Duration(d) + " ago"
	}
	return "in " + Duration(t.Sub(now))
}

// Soon says how soon t comes after now: "in 4m", or "due now" once it
// has passed (a due ask waits for the janitor's next run).
func Soon(now, t time.Time) string {
	if !t.After(now) {
		return "due now"
	}
	return "in " + Duration(t.Sub(now))
}

// Duration is a short, rounded duration: "850ms", "42s", "3m", "2h5m", "3d".
func Duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		h := int(d.Hours())
		if m := int(d.Minutes()) % 60; m > 0 {
			return fmt.Sprintf("%dh%dm", h, m)
		}
		return strconv.Itoa(h) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

// Int formats a count with thousands separators.
func Int[T ~int | ~int64](n T) string { return models.GroupThousands(int64(n), ",") }

// Percent formats part/whole as "12.5%", "—" when whole is 0.
func Percent(part, whole int64) string {
	if whole == 0 {
		return "—"
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 1, 64) + "%"
}

// Tone is the badge colour of a status, result or outcome.
func Tone(s string) string {
	switch s {
	case "paid", "succeeded", "processed", "sent", "ok", "dispatched", "green", "completed", "dispute won", "dispute_won", "done":
		return "ok"
	case "failed", "red", "conflict", "rejected", "error", "refund_required", "invalid_signature", "RED", "archived",
		"dispute open", "dispute lost", "disputed", "dispute_lost", "refund_exceeds_payment",
		"unknown_order", "amount_mismatch", "currency_mismatch", "reference_belongs_to_other_order":
		return "bad"
	case "expired", "cancelled", "stale", "processing", "retry", "too_large", "invalid_payload", "missing_field",
		"invalid_request", "unsupported_media_type", "refused", "noop", "stuck", "scheduled", "unconfirmed", PhaseSentUnknown:
		return "warn"
	case "pending", "duplicate", "active", "queued", "ignored", "refunded", "partially_refunded", "planned":
		return "info"
	}
	return ""
}

// Query builds a URL path with query parameters, leaving out empty ones.
// Pairs are name, value, name, value, ...
func Query(path string, pairs ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			v.Set(pairs[i], pairs[i+1])
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// RefURL turns a reference to a row (order:ID, callback:ID, job:KEY,
// outbox:TASK_ID, product:SKU, invoices:YEAR) into the console page that shows
// it; "" when there is none.
func RefURL(ref string) string {
	kind, id, ok := strings.Cut(ref, ":")
	if !ok || id == "" {
		return ""
	}
	switch kind {
	case "order":
		return "/admin/orders/" + url.PathEscape(id)
	case "callback":
		return "/admin/callbacks/" + url.PathEscape(id)
	case "job":
		return JobURL(id)
	case "outbox":
		return Query("/admin/outbox", "task_id", id)
	case "product":
		return "/admin/products/" + url.PathEscape(id)
	case "invoices":
		return Query("/admin/orders", "status", "paid")
	}
	return ""
}

// Short cuts s to n runes, with an ellipsis.
func Short(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// signed writes n with its sign: "+3", "-1".
func signed(n int64) string {
	if n > 0 {
		return "+" + strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10)
}

// joinQuery appends a query string (without "?") to path.
func joinQuery(path, query string) string {
	if query == "" {
		return path
	}
	return path + "?" + query
}

// perOrder is a product's cap on units per order, or "—" for none.
func perOrder(n *int64) string {
	if n == nil {
		return "—"
	}
	return Int(*n)
}

// JobURL is the page of the job whose task id is key.
func JobURL(key string) string { return "/admin/jobs/" + url.PathEscape(key) }
