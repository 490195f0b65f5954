package alerts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/sekali/sekali/app/stdwebhooks"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/models"
)

// callTimeout bounds one POST: a receiver that hangs is a failed try.
const callTimeout = 10 * time.Second

// Sender delivers recorded alerts to one webhook address.
type Sender struct {
	db     *gorm.DB
	url    string
	key    []byte
	client *http.Client
	now    func() time.Time
}

// NewSender returns a sender to url, signing with key. With url empty it
// sends nothing: each alert it is asked to deliver is marked unsent.
func NewSender(db *gorm.DB, url string, key []byte, now func() time.Time) *Sender {
	client := &http.Client{
		Timeout: callTimeout,
		// A redirect is not an answer: the alert is tried again later.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Sender{db: db, url: url, key: key, client: client, now: now}
}

// Deliver POSTs alert eventID unless it was sent before, and records the
// outcome. final says this is the last try its job has: a failure then
// marks the alert failed (a rerun from the console may still send it).
// A repeat after success sends nothing; a repeat after a failure sends
// the same body under the same webhook-id, newly signed.
func (s *Sender) Deliver(ctx context.Context, eventID string, final bool) (models.AlertStatus, error) {
	var a models.Alert
	if err := s.db.WithContext(ctx).Take(&a, "event_id = ?", eventID).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return "", models.Errorf(models.ENotFound, "alert %s does not exist", eventID)
		}
		return "", fmt.Errorf("alerts.Deliver: %w", store.Classify(err))
	}
	if a.Status == models.AlertSent || a.Status == models.AlertUnsent {
		return a.Status, nil
	}
	if s.url == "" {
		return models.AlertUnsent, s.record(ctx, eventID, map[string]any{"status": models.AlertUnsent,
			"last_error": "ALERT_WEBHOOK_URL was not set"})
	}
	if err := s.post(ctx, a); err != nil {
		status := a.Status
		if final {
			status = models.AlertFailed
		}
		msg := err.Error()
		if len(msg) > 1000 {
			msg = strings.ToValidUTF8(msg[:1000], "")
		}
		if rerr := s.record(ctx, eventID, map[string]any{"status": status, "last_error": msg}); rerr != nil {
			return status, errors.Join(err, rerr)
		}
		return status, err
	}
	return models.AlertSent, s.record(ctx, eventID, map[string]any{"status": models.AlertSent, "last_error": "",
		"sent_at": s.now().UTC()})
}

// record counts a try of eventID and writes its outcome; a sent alert
// stays sent.
func (s *Sender) record(ctx context.Context, eventID string, outcome map[string]any) error {
	outcome["attempts"] = gorm.Expr("attempts + 1")
	err := s.db.WithContext(ctx).Model(&models.Alert{}).
		Where("event_id = ? AND status <> ?", eventID, models.AlertSent).Updates(outcome).Error
	if err != nil {
		return fmt.Errorf("alerts: record a try of %s: %w", eventID, store.Classify(err))
	}
	return nil
}

// post sends a once; any answer but 2xx is a failure.
func (s *Sender) post(ctx context.Context, a models.Alert) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(a.Payload))
	if err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	req.Header = stdwebhooks.Headers(s.key, a.EventID, s.now(), a.Payload)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err // without the address, which may carry a token
	}
	if err != nil {
		return fmt.Errorf("alerts: POST: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("alerts: the receiver answered %s", resp.Status)
	}
	return nil
}
