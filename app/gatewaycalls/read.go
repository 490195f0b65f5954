package gatewaycalls

import (
	"context"
	"fmt"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// openPhases are the phases of a request that is not over: planned, or sent
// with its answer unknown.
var openPhases = []models.GatewayPhase{models.GatewayPlanned, models.GatewaySent}

// Filter selects gateway requests for the console's list.
type Filter struct {
	// Phase is one phase, "open" (planned or sent: not over), or "" for
	// all.
	Phase  string
	Before int64 // keyset cursor: ids below it
	Limit  int
}

// PhaseOpen is the Filter phase of requests that are not over.
const PhaseOpen = "open"

// List reads one page of gateway requests — every kind — newest first,
// and the cursor of the next page (0: none).
func (l *Ledger) List(ctx context.Context, f Filter) ([]models.GatewayRequest, int64, error) {
	q := l.db.WithContext(ctx).Model(&models.GatewayRequest{})
	switch f.Phase {
	case "":
	case PhaseOpen:
		q = q.Where("phase IN ?", openPhases)
	default:
		q = q.Where("phase = ?", f.Phase)
	}
	var rows []models.GatewayRequest
	next, err := store.Keyset(q, f.Before, f.Limit, &rows, func(r models.GatewayRequest) int64 { return r.ID })
	if err != nil {
		return nil, 0, fmt.Errorf("gatewaycalls.List: %w", err)
	}
	return rows, next, nil
}
