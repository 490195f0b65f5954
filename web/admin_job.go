package web

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/jobview"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// jobKey reads the :key of a job's address.
func jobKey(c echo.Context) (string, error) {
	key, err := url.PathUnescape(c.Param("key"))
	if err != nil || key == "" || len(key) > maxFilterLength || !models.CleanText(key) {
		return "", models.Errorf(models.ENotFound, "no job %q", c.Param("key"))
	}
	return key, nil
}

// adminJob is GET /admin/jobs/:key (and /api/admin/jobs/:key): one job
// with every attempt, its timeline, its outbox row, the queue's task and
// its discard.
func (s *Server) adminJob(c echo.Context) error {
	key, err := jobKey(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	d, err := s.deps.Jobs.Job(ctx, key)
	if err != nil {
		return err
	}
	if d.TaskError != "" {
		s.log.WarnContext(ctx, "job page: the queue could not be asked", "request_id", requestID(c), "idempotency_key", key, "error", d.TaskError)
	}
	v := jobDetail(d, s.deps.Now(), s.taskTypes)
	return s.show(c, "Job "+key, "jobs", v, views.JobPage(v))
}

// jobDetail is the job page's one projection: what the HTML and the JSON
// both render.
func jobDetail(d jobview.JobDetail, now time.Time, taskTypes []string) views.JobDetail {
	queueState := ""
	if d.Task != nil {
		queueState = d.Task.State
	}
	v := views.JobDetail{
		Now: now, Job: jobRow(d.Job, now, taskTypes, queueState), Attempts: rows(d.Attempts, attemptRow),
		TaskError: views.NullText(d.TaskError),
	}
	v.CanRerun = d.Job.Status == models.JobFailed || v.Job.Stuck
	v.CanDiscard = v.CanRerun
	if d.Outbox != nil {
		o := outboxRow(*d.Outbox)
		v.Outbox = &o
	}
	if d.Task != nil {
		t := taskRow(*d.Task)
		v.Task = &t
	}
	if d.Job.Status == models.JobDiscarded && d.Job.DiscardedAt != nil {
		v.Discarded = &views.DiscardRow{By: d.Job.DiscardedBy, At: d.Job.DiscardedAt.UTC(), Reason: d.Job.DiscardReason}
	}
	v.Timeline = jobTimeline(d, v.Discarded)
	return v
}

func attemptRow(a models.JobAttempt) views.AttemptRow {
	r := views.AttemptRow{Fence: a.Fence, Worker: a.WorkerID, Started: a.StartedAt.UTC(), Finished: utc(a.FinishedAt),
		Outcome: a.Outcome, Error: a.Error}
	if a.FinishedAt != nil {
		ms := a.FinishedAt.Sub(a.StartedAt).Milliseconds()
		r.DurationMS = &ms
	}
	return r
}

// jobTimeline tells a job's story in time order, as the order's page
// does: written to the outbox, handed to the queue, each attempt's start
// and end, the discard.
func jobTimeline(d jobview.JobDetail, discarded *views.DiscardRow) []views.Event {
	ev := []views.Event{}
	if m := d.Outbox; m != nil {
		ev = append(ev, views.Event{At: m.CreatedAt.UTC(), What: "written to the outbox", Detail: "due " + m.ProcessAt.UTC().Format(time.RFC3339)})
		if m.DispatchedAt != nil {
			ev = append(ev, views.Event{At: m.DispatchedAt.UTC(), What: "handed to the queue " + m.Queue})
		}
	}
	for _, a := range d.Attempts {
		ev = append(ev, views.Event{At: a.StartedAt.UTC(), What: fmt.Sprintf("attempt with fence %d claimed by %s", a.Fence, a.WorkerID)})
		if a.FinishedAt != nil {
			tone := "ok"
			if a.Outcome != "succeeded" {
				tone = "bad"
			}
			ev = append(ev, views.Event{At: a.FinishedAt.UTC(), What: fmt.Sprintf("attempt with fence %d: %s", a.Fence, cmp.Or(a.Outcome, "ended")),
				Detail: a.Error, Tone: tone})
		}
	}
	if discarded != nil {
		ev = append(ev, views.Event{At: discarded.At, What: "discarded by " + discarded.By, Detail: discarded.Reason, Tone: "warn"})
	}
	slices.SortStableFunc(ev, func(a, b views.Event) int { return a.At.Compare(b.At) })
	return ev
}

// actionReason reads the reason of an action (a discard, an apply
// again): the form's field, or for the admin API a JSON body
// {"reason": "…"} when it sends one.
func actionReason(c echo.Context) (string, error) {
	if strings.HasPrefix(c.Request().Header.Get(echo.HeaderContentType), echo.MIMEApplicationJSON) {
		body, err := readJSONBody(c)
		if err != nil {
			return "", err
		}
		var req struct {
			Reason string `json:"reason"`
		}
		if err := decodeStrict(body, &req); err != nil {
			return "", err
		}
		return req.Reason, nil
	}
	return c.FormValue("reason"), nil
}

// actor is who an action is logged as: the console's admin, or "api" for
// the admin API's token.
func actor(c echo.Context) string { return cmp.Or(adminOf(c), "api") }

// adminDiscardJob is POST /admin/jobs/:key/discard (and
// /api/admin/jobs/:key/discard) with a reason: the job is discarded for
// good, and the action log has who and why, in the same transaction. A
// succeeded job, a running one, or one the queue is about to run is a
// 409; no reason a 422; an unknown key a 404. The console goes back to
// the job's page; the API answers with the job's page as JSON.
func (s *Server) adminDiscardJob(c echo.Context) error {
	key, err := jobKey(c)
	if err != nil {
		return err
	}
	reason, err := actionReason(c)
	if err != nil {
		return err
	}
	err = s.deps.Jobs.Discard(c.Request().Context(), jobview.Discard{Key: key, Reason: reason, Admin: actor(c), RemoteAddr: c.RealIP()})
	if err != nil {
		// Nothing was written: the refusal is logged on its own.
		s.record(c, actor(c), "discard job", key, resultOf(err), err.Error())
		return err
	}
	if c.Get(ctxToken) == true {
		return s.adminJob(c)
	}
	s.flash(c, "ok", "Job "+key+" discarded: it does not run again.")
	return seeOther(c, views.JobURL(key))
}

// adminDiscardConfirm is GET /admin/jobs/discard-matching?<filter>: how
// many failed or stuck jobs match, and a form with the reason to discard
// them all.
func (s *Server) adminDiscardConfirm(c echo.Context) error {
	f, p := jobFilter(c.QueryParams(), s.taskTypes)
	if err := p.check(c); err != nil {
		return err
	}
	keys, err := s.deps.Jobs.Discardable(c.Request().Context(), f)
	if err != nil {
		return err
	}
	v := views.DiscardConfirm{Filter: views.JobFilter{Status: f.Status, Type: f.Type, Key: f.Key}, Keys: keys}
	return s.page(c, 200, "Discard jobs", "jobs", views.DiscardConfirmPage(v))
}

// adminDiscardMatching is POST /admin/jobs/discard-matching: discard
// every failed or stuck job that matches the filter (at most 1000, as a
// bulk re-run), each with its own entry in the action log, and one entry
// for the whole.
func (s *Server) adminDiscardMatching(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return models.Errorf(models.EInvalid, "the form could not be read")
	}
	reason := form.Get("reason")
	form.Del("reason")
	f, p := jobFilter(form, s.taskTypes)
	if p.err != nil {
		return p.err
	}
	f.Before, f.Limit = 0, 0
	target := jobFilterQuery(f)
	if target == "" {
		target = "(every failed or stuck job)"
	}
	counts, err := s.deps.Jobs.DiscardAll(c.Request().Context(), f, jobview.Discard{Reason: reason, Admin: actor(c), RemoteAddr: c.RealIP()})
	if code := models.ErrorCode(err); code == models.EMissingField || code == models.EInvalid {
		s.record(c, actor(c), "bulk discard", target, models.ActionRefused, err.Error())
		return err // the reason: nothing was discarded
	}
	summary := discardSummary(counts)
	if err != nil {
		s.record(c, actor(c), "bulk discard", target, models.ActionError, models.Truncate(summary+"; "+reason+"; "+err.Error(), 500))
		s.flash(c, "bad", "Discard: "+summary+". Some failed: "+models.ErrorMessage(err))
	} else {
		s.record(c, actor(c), "bulk discard", target, models.ActionOK, models.Truncate(summary+"; "+reason, 500))
		s.flash(c, "ok", "Discard: "+summary+".")
	}
	return seeOther(c, views.Query("/admin/jobs", "status", f.Status, "type", f.Type, "key", f.Key))
}

func discardSummary(counts map[jobview.DiscardOutcome]int) string {
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
