package web

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// healthz answers as long as the process serves HTTP.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only when every dependency (database, Redis) answers.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	status, checks := http.StatusOK, map[string]string{}
	for name, check := range s.deps.Ready {
		if err := check(ctx); err != nil {
			status, checks[name] = http.StatusServiceUnavailable, "unavailable"
			s.log.WarnContext(ctx, "readiness check failed", "check", name, "error", err)
			continue
		}
		checks[name] = "ok"
	}
	return c.JSON(status, map[string]any{"ready": status == http.StatusOK, "checks": checks})
}
