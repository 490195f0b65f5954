package jobs

import (
	"context"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sekali/sekali/app/tracing"
	"github.com/sekali/sekali/models"
)

// traceparentHeader is the task header that carries the W3C trace
// context from the relay to the worker.
const traceparentHeader = "traceparent"

// taskHeaders are the headers of row m's task: its trace context, if it
// has one.
func taskHeaders(m models.OutboxMessage) map[string]string {
	if m.Traceparent == nil || *m.Traceparent == "" {
		return nil
	}
	return map[string]string{traceparentHeader: *m.Traceparent}
}

// traceTasks runs each task in a span from tp, a child of the trace its
// headers name (a task without one starts a trace of its own: a periodic
// task). The guard's and the job's spans are its children.
func traceTasks(tp trace.TracerProvider) asynq.MiddlewareFunc {
	tracer := tp.Tracer(tracing.Scope)
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			id, _ := asynq.GetTaskID(ctx)
			retry, _ := asynq.GetRetryCount(ctx)
			ctx, span := tracer.Start(tracing.Join(ctx, t.Headers()[traceparentHeader]), "task "+t.Type(),
				trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(attribute.String("sekali.task_id", id), attribute.Int("sekali.retry", retry)))
			err := next.ProcessTask(ctx, t)
			tracing.End(span, err)
			return err
		})
	}
}
