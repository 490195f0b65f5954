package web

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// adminAudit is GET /admin/audit: the invariants, numbered and in the
// order `sekali verify` prints them, and the form that runs them.
func (s *Server) adminAudit(c echo.Context) error {
	v := views.Audit{DrainTimeout: "0s"}
	for _, ch := range s.deps.Audit.Checks() {
		v.Checks = append(v.Checks, views.AuditCheck{ID: ch.ID, Name: ch.Name, Description: ch.Description})
	}
	return s.page(c, http.StatusOK, "Audit", "audit", views.AuditPage(v))
}

// adminRunAudit is POST /admin/audit: run the integrity audit live (no
// drain: work in flight is left out, not reported) or after a chosen
// drain, and show each invariant with its verdict and the offending rows
// linked. It is a POST because every run is recorded.
func (s *Server) adminRunAudit(c echo.Context) error {
	drain, err := time.ParseDuration(c.FormValue("drain_timeout"))
	if err != nil || drain < 0 || drain > maxDrainTimeout {
		return models.Errorf(models.EInvalid, "drain_timeout must be a duration between 0s and %s", maxDrainTimeout)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), drain+time.Minute)
	defer cancel()
	if drain > 0 { // the server's write timeout is shorter than a long drain
		if err := http.NewResponseController(c.Response()).SetWriteDeadline(time.Now().Add(drain + time.Minute)); err != nil {
			return err
		}
	}
	report, err := s.deps.Audit.Run(ctx, drain)
	if err != nil {
		return err
	}
	v := auditView(report, s.deps.Audit.Checks(), drain)
	// A red run was not refused: it ran, and found the books wrong.
	result := models.ActionOK
	if !report.OK {
		result = models.ActionRed
	}
	s.record(c, adminOf(c), "run audit", "drain "+drain.String(), result, auditSummary(report))
	return s.page(c, http.StatusOK, "Audit", "audit", views.AuditPage(v))
}

func auditView(r audit.Report, checks []audit.Check, drain time.Duration) views.Audit {
	v := views.Audit{Ran: true, OK: r.OK, DrainTimeout: drain.String(), Drained: r.Drained, Settling: r.Settling, Took: r.Took}
	byCheck := map[string][]views.AuditViolation{}
	for _, x := range r.Violations {
		if x.Check == "drain" {
			v.DrainFailure = x.Detail
			continue
		}
		byCheck[x.Check] = append(byCheck[x.Check], views.AuditViolation{Detail: x.Detail, URL: views.RefURL(x.Ref)})
	}
	for _, ch := range checks {
		vs := byCheck[ch.Name]
		v.Checks = append(v.Checks, views.AuditCheck{ID: ch.ID, Name: ch.Name, Description: ch.Description, OK: len(vs) == 0, Violations: vs})
	}
	return v
}

func auditSummary(r audit.Report) string {
	if r.OK {
		return "green"
	}
	var failed []string
	for _, v := range r.Violations {
		if !slices.Contains(failed, v.Check) {
			failed = append(failed, v.Check)
		}
	}
	return "RED: " + views.Int(len(r.Violations)) + " violation(s), failed checks: " + strings.Join(failed, ", ")
}
