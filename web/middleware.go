package web

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"
)

// maxAPIBody caps JSON API request bodies.
const maxAPIBody = "1M"

// requestID returns the id the RequestID middleware gave this request.
func requestID(c echo.Context) string {
	return c.Response().Header().Get(echo.HeaderXRequestID)
}

// deadline gives every request a deadline, so that waiting for a database
// connection from a full pool ends in a 503 rather than a hang.
func (s *Server) deadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), s.cfg.RequestTimeout)
		defer cancel()
		c.SetRequest(c.Request().WithContext(ctx))
		return next(c)
	}
}

// accessLog writes one line per request. Bodies and headers are never
// logged: they carry signatures and customer data.
func (s *Server) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err) // write the response now, so its status is logged
		}
		status := c.Response().Status
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		if c.Path() == "/healthz" || c.Path() == "/readyz" || c.Path() == "/metrics" {
			level = slog.LevelDebug
		}
		if !s.log.Enabled(c.Request().Context(), level) {
			return nil
		}
		s.log.Log(c.Request().Context(), level, "http request",
			"request_id", requestID(c), "method", c.Request().Method, "path", c.Request().URL.Path,
			"route", c.Path(), "status", status, "duration_ms", time.Since(start).Milliseconds(),
			"remote_addr", c.RealIP())
		return nil
	}
}

// recoverPanics turns a panic into a logged 500.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.ErrorContext(c.Request().Context(), "panic", "request_id", requestID(c),
					"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}

func echoHandler(h http.Handler) echo.HandlerFunc { return echo.WrapHandler(h) }
