package web

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/catchup"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// catchUpRuns is what the catch-up page reads and asks (catchup.Service).
type catchUpRuns interface {
	Recent(ctx context.Context, n int) ([]models.CatchUpRun, error)
	Ask(ctx context.Context, admin string) error
}

// catchUpShown is how many runs the page lists.
const catchUpShown = 50

// adminCatchUp is GET /admin/catch-up: the newest catch-up runs, each
// with what every gateway answered (docs/operations.md#catching-up-after-an-outage).
func (s *Server) adminCatchUp(c echo.Context) error {
	v := views.CatchUp{Now: s.deps.Now(), Runs: []views.CatchUpRun{}}
	if s.cfg.CatchUpEvery > 0 {
		v.Every = views.Duration(s.cfg.CatchUpEvery)
	}
	if s.deps.CatchUp != nil {
		runs, err := s.deps.CatchUp.Recent(c.Request().Context(), catchUpShown)
		if err != nil {
			return err
		}
		for _, r := range runs {
			row := views.CatchUpRun{ID: r.ID, StartedAt: r.StartedAt.UTC(), FinishedAt: r.FinishedAt, Since: r.Since.UTC(),
				Trigger: r.Trigger, AskedBy: r.AskedBy, Found: catchup.Found(r), Applied: catchup.Applied(r), Error: r.Error}
			for _, g := range r.Gateways {
				row.Gateways = append(row.Gateways, views.CatchUpGateway(g))
			}
			v.Runs = append(v.Runs, row)
		}
	}
	return s.page(c, http.StatusOK, "Catch-up", "catchup", views.CatchUpPage(v))
}

// adminAskCatchUp is POST /admin/catch-up: the worker runs a catch-up
// from the last run's start, now rather than at CATCH_UP_EVERY — after
// an outage, without a shell on the server.
func (s *Server) adminAskCatchUp(c echo.Context) error {
	if s.deps.CatchUp == nil {
		return models.Errorf(models.EInvalid, "this server cannot ask for a catch-up")
	}
	if err := s.deps.CatchUp.Ask(c.Request().Context(), adminOf(c)); err != nil {
		return err
	}
	s.record(c, adminOf(c), "ask catch-up", "", models.ActionOK, "")
	s.flash(c, "ok", "Asked: the worker runs a catch-up from the last run's start; it is listed here when it ends.")
	return seeOther(c, "/admin/catch-up")
}
