package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// maxAPIBody caps JSON API request bodies.
const maxAPIBody = "1M"

// maxRequestIDLength bounds a client's X-Request-Id.
const maxRequestIDLength = 64

// assignRequestID gives every request an id, sent back in X-Request-Id
// and written to the logs and the delivery audit rows. A client's own id
// is kept only when it is short and of a safe alphabet (letters, digits,
// '-', '_', '.', ':'): anyone may send one, and it is stored and logged.
func (s *Server) assignRequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(echo.HeaderXRequestID)
		if !validRequestID(id) {
			id = newRequestID()
		}
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		return next(c)
	}
}

func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLength {
		return false
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:", r)
		if !ok {
			return false
		}
	}
	return true
}

func newRequestID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// baseHeaders sets what every answer carries: no content sniffing.
func (s *Server) baseHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("X-Content-Type-Options", "nosniff")
		return next(c)
	}
}

// noStore keeps answers with personal data (an order's email address,
// the admin API) out of every cache.
func noStore(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "no-store")
		return next(c)
	}
}

// requestID returns the id assignRequestID gave this request.
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
