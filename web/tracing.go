package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sekali/sekali/app/tracing"
)

// traceRequests runs each request in a server span from tp, named by its
// route (not its path, which holds ids), joining a trace its
// traceparent header names. Everything the request does — the callback's
// transaction, the outbox rows and, through them, the jobs — is a child
// of it. Mounted only when tracing is on (Deps.Tracer).
func (s *Server) traceRequests(tp trace.TracerProvider) echo.MiddlewareFunc {
	tracer := tp.Tracer(tracing.Scope)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			ctx, span := tracer.Start(tracing.Extract(r.Context(), r.Header), r.Method+" "+route,
				trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", route),
					attribute.String("sekali.request_id", requestID(c))))
			defer span.End()
			c.SetRequest(r.WithContext(ctx))
			if err := next(c); err != nil {
				c.Error(err) // answer now, inside the span, so its status is known (as accessLog does)
			}
			status := c.Response().Status
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			if status >= http.StatusInternalServerError {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			return nil
		}
	}
}
