package web

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/jobview"
	"github.com/sekali/sekali/app/outbox"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

var jobStatuses = []string{string(models.JobProcessing), jobview.Stuck, string(models.JobFailed), string(models.JobSucceeded), string(models.JobDiscarded)}

// jobFilter reads the jobs list's filter, and the params read, for the
// caller to check; jobTypes are the business task types (the job queue's
// TaskTypes).
func jobFilter(q url.Values, jobTypes []string) (jobview.Filter, *params) {
	p := newParams(q)
	f := jobview.Filter{
		Status: p.oneOf("status", jobStatuses...), Type: p.oneOf("type", jobTypes...), Key: p.text("key"),
		Before: p.id("before"), Limit: p.limit(),
	}
	return f, p
}

func jobFilterQuery(f jobview.Filter) string {
	return strings.TrimPrefix(views.Query("", "status", f.Status, "type", f.Type, "key", f.Key), "?")
}

// adminJobs is GET /admin/jobs: the job_executions rows (key, type,
// business key, status, attempts, fence, worker, lease, last error) and
// the queue's archived tasks — the jobs that gave up.
func (s *Server) adminJobs(c echo.Context) error {
	f, p := jobFilter(c.QueryParams(), s.taskTypes)
	if err := p.check(c); err != nil {
		return err
	}
	ctx := c.Request().Context()
	execs, next, err := s.deps.Jobs.List(ctx, f)
	if err != nil {
		return err
	}
	now := s.deps.Now()
	l := listPage(s, c, "/admin/jobs", execs, formatID(next),
		func(j models.JobExecution) views.JobRow { return jobRow(j, now, s.taskTypes, "") })
	v := views.Jobs{
		List: l, Filter: views.JobFilter{Status: f.Status, Type: f.Type, Key: f.Key}, Query: jobFilterQuery(f),
		Archived: []views.TaskRow{},
	}
	archived, err := s.deps.Jobs.Archived(ctx, f)
	if err != nil {
		// The rows above come from PostgreSQL; the queue being away
		// must not hide them.
		msg := "The queue could not be asked for its archived tasks: " + models.ErrorMessage(err)
		v.ArchivedError = views.NullText(msg)
		s.log.WarnContext(ctx, "archived tasks unavailable", "request_id", requestID(c), "error", err)
	}
	v.Archived = append(v.Archived, rows(archived, taskRow)...)
	anyFailed, err := s.deps.Jobs.AnyFailed(ctx, f)
	if err != nil {
		return err
	}
	v.CanRerunMatching = anyFailed || len(v.Archived) > 0
	return s.show(c, "Jobs", "jobs", v, views.JobsPage(v, jobStatuses, s.taskTypes))
}

// rerunText says what a re-run did, for people.
var rerunText = map[jobview.RerunOutcome]string{
	jobview.RerunAlreadyDone:  "already done: it succeeded before, nothing changed",
	jobview.RerunQueued:       "queued: the queue runs it now, through the guard",
	jobview.RerunRedispatched: "handed to the queue again from the outbox; it runs through the guard",
	jobview.RerunInFlight:     "already pending, running or scheduled in the queue",
}

// adminRerunJob is POST /admin/jobs/rerun with the job's key: the job
// runs again through the guard, so a job that already succeeded answers
// "already done" and changes nothing.
func (s *Server) adminRerunJob(c echo.Context) error {
	key := strings.TrimSpace(c.FormValue("key"))
	if key == "" || len(key) > maxFilterLength || !models.CleanText(key) {
		return models.Errorf(models.EInvalid, "key names no job")
	}
	out, err := s.deps.Jobs.Rerun(c.Request().Context(), key)
	if err != nil {
		s.record(c, adminOf(c), "re-run job", key, resultOf(err), err.Error())
		if models.ErrorCode(err) == models.ENotFound {
			s.flash(c, "bad", models.ErrorMessage(err))
			return seeOther(c, views.Query("/admin/jobs", "key", key))
		}
		return err
	}
	result := models.ActionOK
	if out == jobview.RerunAlreadyDone || out == jobview.RerunInFlight {
		result = models.ActionNoop
	}
	s.record(c, adminOf(c), "re-run job", key, result, string(out))
	tone := "ok"
	if result == models.ActionNoop {
		tone = "warn"
	}
	s.flash(c, tone, "Job "+key+": "+rerunText[out]+".")
	return seeOther(c, views.Query("/admin/jobs", "key", key))
}

// resultOf is the action-log result of a failed action: refused when the
// request itself was wrong, error when a retry may help.
func resultOf(err error) string {
	if statusOfError(err) < 500 {
		return models.ActionRefused
	}
	return models.ActionError
}

// adminRerunConfirm is GET /admin/jobs/rerun-matching?<filter>: how many
// failed or archived jobs match, and a button to re-run them all.
func (s *Server) adminRerunConfirm(c echo.Context) error {
	f, p := jobFilter(c.QueryParams(), s.taskTypes)
	if err := p.check(c); err != nil {
		return err
	}
	keys, err := s.deps.Jobs.Rerunnable(c.Request().Context(), f)
	if err != nil {
		return err
	}
	v := views.RerunConfirm{Filter: views.JobFilter{Status: f.Status, Type: f.Type, Key: f.Key}, Keys: keys}
	return s.page(c, 200, "Re-run jobs", "jobs", views.RerunConfirmPage(v))
}

// adminRerunMatching is POST /admin/jobs/rerun-matching: re-run every
// failed or archived job that matches the filter, each through the guard.
func (s *Server) adminRerunMatching(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return models.Errorf(models.EInvalid, "the form could not be read")
	}
	f, p := jobFilter(form, s.taskTypes) // the form's other fields are the form's
	if p.err != nil {
		return p.err
	}
	f.Before, f.Limit = 0, 0
	counts, err := s.deps.Jobs.RerunAll(c.Request().Context(), f)
	summary := rerunSummary(counts)
	target := jobFilterQuery(f)
	if target == "" {
		target = "(every failed or archived job)"
	}
	if err != nil {
		s.record(c, adminOf(c), "bulk re-run", target, models.ActionError, summary+"; "+err.Error())
		s.flash(c, "bad", "Re-run: "+summary+". Some failed: "+models.ErrorMessage(err))
	} else {
		s.record(c, adminOf(c), "bulk re-run", target, models.ActionOK, summary)
		s.flash(c, "ok", "Re-run: "+summary+".")
	}
	return seeOther(c, views.Query("/admin/jobs", "status", f.Status, "type", f.Type, "key", f.Key))
}

func rerunSummary(counts map[jobview.RerunOutcome]int) string {
	var parts []string
	for out, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, out))
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "nothing matched"
	}
	return strings.Join(parts, ", ")
}

var outboxStatuses = []string{string(models.OutboxPending), string(models.OutboxDispatched)}

// adminOutbox is GET /admin/outbox: pending and dispatched rows with
// their age and attempts, and "dispatch now".
func (s *Server) adminOutbox(c echo.Context) error {
	p := newParams(c.QueryParams())
	f := outbox.Filter{
		Status: models.OutboxStatus(p.oneOf("status", outboxStatuses...)), Type: p.oneOf("type", s.taskTypes...),
		TaskID: p.text("task_id"), Before: p.id("before"), Limit: p.limit(),
	}
	if err := p.check(c); err != nil {
		return err
	}
	ms, next, err := s.deps.Jobs.ListOutbox(c.Request().Context(), f)
	if err != nil {
		return err
	}
	v := listPage(s, c, "/admin/outbox", ms, formatID(next), outboxRow)
	form := views.OutboxFilter{Status: string(f.Status), Type: f.Type, TaskID: f.TaskID}
	return s.show(c, "Outbox", "outbox", v, views.OutboxPage(v, form, outboxStatuses, s.taskTypes))
}

// adminDispatch is POST /admin/outbox/:id/dispatch: hand the row's task
// to the queue now (it keeps its due time), pending or not — after Redis
// lost its data, a dispatched row can be handed over again.
func (s *Server) adminDispatch(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return models.Errorf(models.ENotFound, "no outbox row %q", c.Param("id"))
	}
	target := "outbox " + c.Param("id")
	out, err := s.deps.Jobs.DispatchNow(c.Request().Context(), id)
	if err != nil {
		s.record(c, adminOf(c), "dispatch", target, resultOf(err), err.Error())
		return err
	}
	switch out {
	case jobview.DispatchAlreadyQueued:
		s.record(c, adminOf(c), "dispatch", target, models.ActionNoop, string(out))
		s.flash(c, "warn", "The queue already had this task; the row is marked dispatched.")
	default:
		s.record(c, adminOf(c), "dispatch", target, models.ActionOK, string(out))
		s.flash(c, "ok", "Handed to the queue.")
	}
	return seeOther(c, "/admin/outbox")
}
