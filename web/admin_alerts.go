package web

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/alerts"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// alertLink is the console page of what raised alert a, read from its
// payload: the audit, the archived job (or the failed jobs), the
// conflicting deliveries, the outbox row handed over again, the order of
// a failed refund or of an answer in conflict, the calls to the gateway.
func alertLink(a models.Alert) string {
	var p struct {
		Data struct {
			OrderID     string   `json:"order_id"`
			TaskIDs     []string `json:"task_ids"`
			FirstTaskID string   `json:"first_task_id"`
		} `json:"data"`
	}
	_ = json.Unmarshal(a.Payload, &p) // a payload it cannot read links to the type's list
	d := p.Data
	switch a.Type {
	case alerts.AuditRed:
		return "/admin/audit"
	case alerts.JobsArchived:
		if len(d.TaskIDs) == 1 {
			return views.RefURL("job:" + d.TaskIDs[0])
		}
		return views.Query("/admin/jobs", "status", string(models.JobFailed))
	case alerts.ConflictBurst:
		return views.Query("/admin/deliveries", "outcome", models.OutcomeConflict)
	case alerts.ReconcilerSent:
		if d.FirstTaskID != "" {
			return views.RefURL("outbox:" + d.FirstTaskID)
		}
		return "/admin/outbox"
	case alerts.RefundFailed, alerts.GatewayConflict:
		if d.OrderID != "" {
			return views.RefURL("order:" + d.OrderID)
		}
		return "/admin/gateway-requests"
	case alerts.GatewayDown:
		return "/admin/gateway-requests"
	}
	return ""
}

// adminAcknowledgeAlert is POST /admin/alerts/:id/acknowledge (an
// operator or an owner): the alert is acknowledged, logged in the same
// transaction, and leaves the dashboard. One acknowledged already is a
// 409.
func (s *Server) adminAcknowledgeAlert(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return models.Errorf(models.ENotFound, "no alert %q", c.Param("id"))
	}
	if s.deps.Alerts == nil {
		return models.Errorf(models.ENotFound, "this server takes no acknowledgements of alerts")
	}
	a, err := s.deps.Alerts.Acknowledge(c.Request().Context(), alerts.Ack{ID: id, Admin: adminOf(c), RemoteAddr: c.RealIP()})
	if err != nil {
		return err
	}
	s.flash(c, "ok", fmt.Sprintf("Alert %s acknowledged: it leaves the dashboard.", a.EventID))
	return seeOther(c, "/admin")
}
