package jobs_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sekali/sekali/jobs"
)

// A refund:send payload carries the refund record's id and the admin's
// request id in fields of their own. Payloads of the first version, still
// in outboxes and queues, named the record by a numeric request_id: they
// are read as that record, with no request id. The task id is the same in
// both.
func TestRefundArgsReadBothVersions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, payload string
		want          jobs.RefundArgs
	}{
		{"this version", `{"refund_request_id":7,"order_id":"ORD-1","request_id":"req-9"}`,
			jobs.RefundArgs{RefundRequestID: 7, OrderID: "ORD-1", RequestID: "req-9"}},
		{"this version, no request id", `{"refund_request_id":7,"order_id":"ORD-1"}`,
			jobs.RefundArgs{RefundRequestID: 7, OrderID: "ORD-1"}},
		{"the first version", `{"request_id":7,"order_id":"ORD-1"}`,
			jobs.RefundArgs{RefundRequestID: 7, OrderID: "ORD-1"}},
		{"a null request id", `{"refund_request_id":7,"order_id":"ORD-1","request_id":null}`,
			jobs.RefundArgs{RefundRequestID: 7, OrderID: "ORD-1"}},
	}
	for _, tt := range tests {
		var got jobs.RefundArgs
		if err := json.Unmarshal([]byte(tt.payload), &got); err != nil || got != tt.want {
			t.Errorf("%s: %s read as %+v (%v), want %+v", tt.name, tt.payload, got, err, tt.want)
		}
		if got.Key() != "7" {
			t.Errorf("%s: key %q, want 7 (task refund:send:7)", tt.name, got.Key())
		}
	}
	for _, bad := range []string{`{"request_id":true}`, `{"refund_request_id":"7"}`, `[]`} {
		var got jobs.RefundArgs
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("%s read as %+v, want an error", bad, got)
		}
	}
	// Written and read back: the same args.
	m := jobs.Tasks{}.Refund(7, "ORD-1", "req-9", time.Now())
	var back jobs.RefundArgs
	if err := json.Unmarshal(m.Payload, &back); err != nil || back != (jobs.RefundArgs{RefundRequestID: 7, OrderID: "ORD-1", RequestID: "req-9"}) {
		t.Errorf("the row's payload %s read back as %+v (%v)", m.Payload, back, err)
	}
}
