package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// nestedBody is an object nested depth deep whose member x is v at every
// level: indented, each level's line repeats its depth as spaces, and two
// of them differ at every level, each path as long as its depth — both
// grow with the square of the depth.
func nestedBody(depth int, v string) []byte {
	return []byte(strings.Repeat(`{"x":`+v+`,"n":`, depth) + "null" + strings.Repeat("}", depth))
}

// A conflict whose kept bodies nest a thousand levels deep (kept before
// the pipeline's depth limit, or edited in the database) costs a bounded
// page: the HTML and the JSON each stay under a megabyte, say "too large
// to diff" instead of a list of changes, and the JSON is whole.
func TestConflictOfDeepBodiesIsBounded(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "DEEP", 50000, 10)
	o := c.newOrder("DEEP", 1)
	accepted := testenv.SandboxBody(o.ID, "tx-deep", models.EventPaid, o.TotalAmount)
	if got := c.deliver("evt_deep", accepted); got != http.StatusOK {
		t.Fatalf("the accepted delivery: %d", got)
	}
	refused := []byte(strings.Replace(string(accepted), `"currency":"IDR"}`, `"currency":"USD"}`, 1))
	if got := c.deliver("evt_deep", refused); got != http.StatusConflict {
		t.Fatalf("the conflicting delivery: %d", got)
	}
	var cb models.PaymentCallback
	c.db.Take(&cb, "idempotency_key = 'evt_deep'")
	testenv.Eventually(t, "the conflict's row, with its body", func() bool {
		var n int64
		c.db.Model(&models.CallbackDelivery{}).Where("callback_id = ? AND outcome = 'conflict' AND body IS NOT NULL", cb.ID).Count(&n)
		return n == 1
	})
	const depth = 1000
	for outcome, body := range map[string][]byte{"processed": nestedBody(depth, "0"), "conflict": nestedBody(depth, "1")} {
		if err := c.db.Exec("UPDATE callback_deliveries SET body = ? WHERE callback_id = ? AND outcome = ?", body, cb.ID, outcome).Error; err != nil {
			t.Fatal(err)
		}
	}
	const bound = 1 << 20
	page := c.get(fmt.Sprintf("/admin/callbacks/%d", cb.ID))
	if page.StatusCode != http.StatusOK || len(page.Body) > bound {
		t.Errorf("the page: %d, %d bytes; want 200 within %d", page.StatusCode, len(page.Body), bound)
	}
	if doc := page.Doc(t); !strings.Contains(doc.Find(".too-large").Text(), "Too large to diff") {
		t.Error(`the page does not say "Too large to diff"`)
	}
	js := c.api(fmt.Sprintf("/api/admin/callbacks/%d", cb.ID))
	var v struct {
		Conflicts []struct {
			TooLarge bool `json:"too_large_to_diff"`
			Changes  []any
			Why      string
		}
	}
	if err := json.Unmarshal([]byte(js.Body), &v); err != nil || js.StatusCode != http.StatusOK || len(js.Body) > bound {
		t.Fatalf("the JSON: %d, %d bytes, %v; want 200, whole, within %d", js.StatusCode, len(js.Body), err, bound)
	}
	t.Logf("depth %d: the page %d bytes, the JSON %d bytes", depth, len(page.Body), len(js.Body))
	if len(v.Conflicts) != 1 || !v.Conflicts[0].TooLarge || len(v.Conflicts[0].Changes) != 0 || !strings.Contains(v.Conflicts[0].Why, "too large to diff") {
		t.Errorf("the JSON's conflicts: %+v", v.Conflicts)
	}
}

// A kept body's secrets are not shown, on the page or in its JSON, even
// to an owner: a signature_key in it is cut to its first characters, a
// client_secret is "[redacted]".
func TestKeptBodySecretsAreNotShown(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.login()
	testenv.MustCreateProduct(t, c.db, "SIG", 50000, 10)
	o := c.newOrder("SIG", 1)
	if got := c.deliver("evt_sig", testenv.SandboxBody(o.ID, "tx-sig", models.EventPaid, o.TotalAmount)); got != http.StatusOK {
		t.Fatalf("the delivery: %d", got)
	}
	var cb models.PaymentCallback
	c.db.Take(&cb, "idempotency_key = 'evt_sig'")
	sig := strings.Repeat("9f8e", 32)
	body := `{"order_id":"` + o.ID + `","signature_key":"` + sig + `","client_secret":"pi_3_secret_xyz"}`
	if err := c.db.Exec("UPDATE callback_deliveries SET body = ? WHERE callback_id = ?", []byte(body), cb.ID).Error; err != nil {
		t.Fatal(err)
	}
	page := c.get(fmt.Sprintf("/admin/callbacks/%d", cb.ID)).Body
	js := c.api(fmt.Sprintf("/api/admin/callbacks/%d", cb.ID)).Body
	for what, text := range map[string]string{"the page": page, "the JSON": js} {
		if strings.Contains(text, sig) || strings.Contains(text, "pi_3_secret_xyz") || !strings.Contains(text, "9f8e9f8e9f8e") {
			t.Errorf("%s shows a kept body's secret, or not its signature's first characters", what)
		}
	}
}
