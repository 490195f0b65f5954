package web

import (
	"net"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sekali/sekali/app/tracing"
)

// traceRequests runs each request in a server span from tp, named by its
// route (not its path, which holds ids). Everything the request does —
// the callback's transaction, the outbox rows and, through them, the
// jobs — is a child of it. Mounted only when tracing is on (Deps.Tracer).
//
// The span joins the trace a traceparent header names only when the
// connection's peer is trusted (TRACEPARENT_FROM); from anyone else the
// header is not read, and the request starts a trace of Sekali's own,
// sampled at the operator's ratio. So a stranger can neither have spans
// exported against that ratio nor choose the trace id a delivery's row
// keeps, refused or not.
func (s *Server) traceRequests(tp trace.TracerProvider) echo.MiddlewareFunc {
	tracer := tp.Tracer(tracing.Scope)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			ctx := r.Context()
			if s.trustsTraceParent(r) {
				ctx = tracing.ExtractTrusted(ctx, r.Header)
			}
			ctx, span := tracer.Start(ctx, r.Method+" "+route,
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

// trustsTraceParent says whether r's peer — the connection's, not an
// address a header names — is in TRACEPARENT_FROM.
func (s *Server) trustsTraceParent(r *http.Request) bool {
	if len(s.cfg.Tracing.ParentsFrom) == 0 {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	for _, n := range s.cfg.Tracing.ParentsFrom {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}
