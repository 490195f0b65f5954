package web

import (
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// chartMinutes is the span of the deliveries chart.
const chartMinutes = 60

// adminDashboard is GET /admin: the last hour and the last 24 hours at a
// glance, refreshed every five seconds. Every figure is a small read —
// per-minute rollups, partial indexes, index ranges of a time window —
// never a count over a whole big table.
func (s *Server) adminDashboard(c echo.Context) error {
	ctx := c.Request().Context()
	now := s.deps.Now().UTC()
	d, err := s.deps.Stats.Dashboard(ctx)
	if err != nil {
		return err
	}
	daySince := now.Add(-24 * time.Hour).Truncate(time.Minute) // as DeliveriesSince reads it
	counts, err := s.deps.Stats.DeliveriesSince(ctx, daySince)
	if err != nil {
		return err
	}
	v := views.Dashboard{
		Now: now, JobsProcessing: d.JobsProcessing, JobsFailed: d.JobsFailed, JobsStuck: d.JobsStuck,
		JobsSucceededHour: d.JobsSucceededHour, JobsSucceededDay: d.JobsSucceededDay,
		OutboxPending: d.OutboxPending, OutboxOldest: d.OutboxOldestAge,
		ConflictsDay: d.ConflictsDay, Conflicts: rows(d.Conflicts, callbackRow),
		OrdersHour: statusCounts(d.OrdersHour), OrdersDay: statusCounts(d.OrdersDay),
		NotRecorded: s.deps.Payments.DroppedDeliveryRows(),
	}
	if n, err := s.deps.Jobs.ArchivedCount(ctx); err == nil {
		v.Archived = &n
	} else {
		s.log.WarnContext(ctx, "archived task count unavailable", "request_id", requestID(c), "error", err)
	}
	v.Alerts = make([]views.AlertRow, 0, len(d.Alerts))
	for _, a := range d.Alerts {
		v.Alerts = append(v.Alerts, views.AlertRow{ID: a.ID, Link: alertLink(a), Event: a.Type, WebhookID: a.EventID, At: a.CreatedAt.UTC(),
			Status: string(a.Status), Attempts: a.Attempts, SentAt: a.SentAt, LastError: a.LastError})
	}
	if a := d.LastAudit; a != nil {
		v.LastAudit = &views.AuditVerdict{OK: a.OK, Violations: a.Violations, Summary: a.Summary, At: a.CreatedAt.UTC()}
	}

	// The deliveries: two windows by result, and the last hour per minute.
	start := now.Truncate(time.Minute).Add(-(chartMinutes - 1) * time.Minute)
	hour, day := map[string]int64{}, map[string]int64{}
	perMinute := map[time.Time]map[string]int64{}
	for _, mc := range counts {
		series := seriesOf(mc.Outcome)
		day[series] += mc.Deliveries
		if mc.Minute.Before(start) {
			continue
		}
		hour[series] += mc.Deliveries
		m := mc.Minute.UTC()
		if perMinute[m] == nil {
			perMinute[m] = map[string]int64{}
		}
		perMinute[m][series] += mc.Deliveries
	}
	v.Deliveries = []views.DeliveryWindow{deliveryWindow("1 h", "last_hour", start, hour), deliveryWindow("24 h", "last_24h", daySince, day)}
	v.Chart = views.NewChart(start, chartMinutes, perMinute)
	return s.show(c, "Dashboard", "dashboard", v, views.DashboardPage(v))
}

// seriesOf puts a delivery outcome in its chart series: every refusal is
// "refused".
func seriesOf(outcome string) string {
	if slices.Contains(payments.RefusedOutcomes, outcome) {
		return "refused"
	}
	return outcome
}

// deliveryWindow is one window of deliveries: its label on the page, its
// name in the JSON, since when, and bySeries, the counts by chart series.
func deliveryWindow(label, window string, since time.Time, bySeries map[string]int64) views.DeliveryWindow {
	w := views.DeliveryWindow{Label: label, Window: window, Since: since, ByResult: views.Counts{}}
	for _, series := range views.ChartSeries {
		w.Total += bySeries[series]
		w.ByResult = append(w.ByResult, views.StatusCount{Status: series, N: bySeries[series]})
	}
	w.Duplicates = bySeries[models.OutcomeDuplicate]
	if w.Total > 0 {
		share := float64(w.Duplicates) / float64(w.Total)
		w.DuplicateShare = &share
	}
	return w
}

// statusCounts is orders by status, every status present.
func statusCounts(m map[models.OrderStatus]int64) views.Counts {
	out := views.Counts{}
	for _, st := range orderStatuses {
		out = append(out, views.StatusCount{Status: st, N: m[models.OrderStatus(st)]})
	}
	return out
}
