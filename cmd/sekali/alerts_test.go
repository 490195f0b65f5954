package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sekali/sekali/app/stdwebhooks"
	"github.com/sekali/sekali/app/testenv"
)

// TestAuditRedAlertReachesTheWebhookOnce is the test through the
// whole app: the stock is corrupted by hand, `sekali verify` runs twice
// (both red), the receiver refuses the first POST; the relay and the
// worker of `sekali serve` deliver audit.red to the receiver, which
// accepts it exactly once, every POST validly signed under one webhook-id.
func TestAuditRedAlertReachesTheWebhookOnce(t *testing.T) {
	t.Parallel()
	key := []byte("alert-webhook-key-of-the-app-test")
	type post struct {
		id, event string
		verified  error
		accepted  bool
	}
	var mu sync.Mutex
	var posts []post
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var payload struct{ Type string }
		json.Unmarshal(body, &payload)
		mu.Lock()
		defer mu.Unlock()
		p := post{id: r.Header.Get(stdwebhooks.HeaderID), event: payload.Type,
			verified: stdwebhooks.Verify([][]byte{key}, r.Header, body, time.Now()), accepted: len(posts) > 0}
		posts = append(posts, p)
		if !p.accepted {
			http.Error(w, "down for a moment", http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(sink.Close)
	a := startApp(t, map[string]string{"ALERT_WEBHOOK_URL": sink.URL, "ALERT_WEBHOOK_SECRET": stdwebhooks.EncodeSecret(key)})

	testenv.MustCreateProduct(t, a.DB, "ALERT-TEE", 150000, 10)
	a.DB.Exec("UPDATE products SET stock = 8 WHERE sku = 'ALERT-TEE'")
	for range 2 {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"sekali", "verify", "--drain-timeout=0s"}, a.getenv, &out, io.Discard); err == nil {
			t.Fatalf("sekali verify with the stock corrupted passed:\n%s", out.String())
		}
	}
	sent := func() bool {
		var n int64
		a.DB.Raw("SELECT count(*) FROM alerts WHERE type = 'audit.red' AND status = 'sent'").Scan(&n)
		return n == 1
	}
	testenv.Eventually(t, "audit.red sent", sent)

	mu.Lock()
	defer mu.Unlock()
	accepted := 0
	for i, p := range posts {
		if p.event != "audit.red" || p.verified != nil || p.id != posts[0].id {
			t.Errorf("POST %d: %s under %q (the first's: %q), signature: %v", i+1, p.event, p.id, posts[0].id, p.verified)
		}
		if p.accepted {
			accepted++
		}
	}
	if len(posts) != 2 || accepted != 1 {
		t.Errorf("%d POSTs, %d accepted; want the refused one and one accepted", len(posts), accepted)
	}

	// The operator sees it on the dashboard: raised once, sent.
	b := loggedInBrowser(t, a)
	if st := b.open("/admin"); st != http.StatusOK {
		t.Fatalf("GET /admin: %d", st)
	}
	rows := browserEval[[]string](b, "read the dashboard's alerts",
		`[...[...document.querySelectorAll("h2")].find(h => h.innerText === "Alerts").nextElementSibling.querySelectorAll("tbody tr")].map(tr => tr.querySelector("td").innerText + " " + tr.querySelector(".badge").innerText)`)
	if want := []string{"audit.red sent"}; !slices.Equal(rows, want) {
		t.Errorf("the dashboard's alerts: %q, want %q", rows, want)
	}
	b.screenshot("dashboard-alerts")
}
