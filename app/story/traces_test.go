package story_test

import (
	"slices"
	"testing"

	"github.com/sekali/sekali/app/story"
	"github.com/sekali/sekali/models"
)

// TestTracesAreTheAppliedDeliveries: an order's traces are those of the
// deliveries that applied its callbacks, each once, oldest first; a
// duplicate's trace and an untraced delivery (tracing off) add none.
func TestTracesAreTheAppliedDeliveries(t *testing.T) {
	t.Parallel()
	const paid, refunded, dup = "0af7651916cd43dd8448eb211c80319c", "4bf92f3577b34da6a3ce929d0e0e4736", "11111111111111111111111111111111"
	s := story.Order{
		Callbacks: []models.PaymentCallback{{ID: 1}, {ID: 2}, {ID: 3}},
		Deliveries: map[int64][]models.CallbackDelivery{
			1: {{Outcome: models.OutcomeProcessed, TraceID: paid}, {Outcome: models.OutcomeDuplicate, TraceID: dup}},
			2: {{Outcome: models.OutcomeStale, TraceID: refunded}, {Outcome: models.OutcomeProcessed, TraceID: paid}},
			3: {{Outcome: models.OutcomeProcessed}},
		},
	}
	if got := s.Traces(); !slices.Equal(got, []string{paid, refunded}) {
		t.Errorf("Traces() = %v; want the paid and the refunded callbacks' traces", got)
	}
	if got := (&story.Order{}).Traces(); got != nil {
		t.Errorf("an order without callbacks has traces %v", got)
	}
}
