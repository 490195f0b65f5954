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
		Archived: -1,
	}
	j := dashboardJSON{
		Now: now, JobsProcessing: d.JobsProcessing, JobsFailed: d.JobsFailed, JobsStuck: d.JobsStuck,
		JobsSucceededHour: d.JobsSucceededHour, JobsSucceededDay: d.JobsSucceededDay,
		OutboxPending: d.OutboxPending, OutboxOldestAge: d.OutboxOldestAge,
		ConflictsDay: d.ConflictsDay, Conflicts: rows(d.Conflicts, newCallbackRowJSON),
		OrdersHour: statusCountsJSON(d.OrdersHour), OrdersDay: statusCountsJSON(d.OrdersDay),
	}
	if n, err := s.deps.Jobs.ArchivedCount(ctx); err == nil {
		v.Archived, j.ArchivedTasks = n, &n
	} else {
		s.log.WarnContext(ctx, "archived task count unavailable", "request_id", requestID(c), "error", err)
	}
	if a := d.LastAudit; a != nil {
		v.LastAudit = &views.AuditVerdict{OK: a.OK, Violations: a.Violations, Summary: a.Summary, At: a.CreatedAt}
		j.LastAudit = &auditVerdictJSON{OK: a.OK, Violations: a.Violations, Summary: a.Summary, At: a.CreatedAt.UTC()}
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
	v.Deliveries = []views.DeliveryWindow{deliveryWindow("1 h", hour), deliveryWindow("24 h", day)}
	v.Chart = views.NewChart(start, chartMinutes, perMinute)
	j.Deliveries = []deliveryWindowJSON{
		deliveryWindowOf("last_hour", start, hour), deliveryWindowOf("last_24h", daySince, day),
	}
	return s.show(c, "Dashboard", "dashboard", j, views.DashboardPage(v))
}

// seriesOf puts a delivery outcome in its chart series: every refusal is
// "refused".
func seriesOf(outcome string) string {
	if slices.Contains(payments.RefusedOutcomes, outcome) {
		return "refused"
	}
	return outcome
}

func deliveryWindow(label string, bySeries map[string]int64) views.DeliveryWindow {
	w := views.DeliveryWindow{Label: label, ByResult: []views.StatusCount{}}
	for _, series := range views.ChartSeries {
		w.Total += bySeries[series]
		w.ByResult = append(w.ByResult, views.StatusCount{Status: series, N: bySeries[series]})
	}
	w.Duplicates = bySeries[models.OutcomeDuplicate]
	w.DuplicateShare = views.Percent(w.Duplicates, w.Total)
	return w
}

// deliveryWindowOf is one window of deliveries as JSON: since when, and
// bySeries, the counts by chart series.
func deliveryWindowOf(window string, since time.Time, bySeries map[string]int64) deliveryWindowJSON {
	w := deliveryWindowJSON{Window: window, Since: since, ByResult: map[string]int64{}}
	for _, series := range views.ChartSeries {
		w.Total += bySeries[series]
		w.ByResult[series] = bySeries[series]
	}
	w.Duplicates = bySeries[models.OutcomeDuplicate]
	if w.Total > 0 {
		share := float64(w.Duplicates) / float64(w.Total)
		w.DuplicateShare = &share
	}
	return w
}

// statusCountsJSON is orders by status, every status present.
func statusCountsJSON(m map[models.OrderStatus]int64) map[string]int64 {
	out := map[string]int64{}
	for _, st := range orderStatuses {
		out[st] = m[models.OrderStatus(st)]
	}
	return out
}

func statusCounts(m map[models.OrderStatus]int64) []views.StatusCount {
	out := []views.StatusCount{}
	for _, st := range orderStatuses {
		out = append(out, views.StatusCount{Status: st, N: m[models.OrderStatus(st)]})
	}
	return out
}
