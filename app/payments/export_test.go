package payments

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/sekali/sekali/models"
)

// DeliveryLog is the log of the audit rows of deliveries that applied
// nothing, for a test that fills its queue.
type DeliveryLog struct{ l *deliveryLog }

// NewDeliveryLog starts a delivery log with room for size rows.
func NewDeliveryLog(db *gorm.DB, log *slog.Logger, dropped prometheus.Counter, size int) DeliveryLog {
	return DeliveryLog{newDeliveryLog(db, log, dropped, size)}
}

// Add queues a row, as a delivery's answer does.
func (d DeliveryLog) Add(row models.CallbackDelivery) { d.l.add(context.Background(), row, false) }

// Queued is how many rows wait for the writer.
func (d DeliveryLog) Queued() int { return len(d.l.ch) }

// Close writes what is queued and stops.
func (d DeliveryLog) Close() { d.l.close() }

// Dropped is how many rows it could not write (Service.DroppedDeliveryRows).
func (d DeliveryLog) Dropped() int64 { return d.l.lost.Load() }

// KeptHeaders is keptHeaders, for a test of what is redacted.
var KeptHeaders = keptHeaders
