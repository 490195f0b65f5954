package loadtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sekali/sekali/app/gateways/midtrans"
	"github.com/sekali/sekali/app/payments"
)

// client speaks Sekali's API for set-up and verdicts.
type client struct {
	base  string
	token string
	send  payments.Sender // writes and signs the gateway's notifications
	http  *http.Client

	mu          sync.Mutex
	registerErr error // the first failure to tell the sandbox gateway of a fact (tell)
}

func (c *client) do(ctx context.Context, method, path string, header http.Header, body []byte, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, err
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return res.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
	}
	return res.StatusCode, nil
}

// createProduct makes a product with a SKU of its own and returns the SKU.
func (c *client) createProduct(ctx context.Context, scenario string, price, stock int64) (string, error) {
	sku := fmt.Sprintf("RP-%s-%s", strings.ToUpper(scenario), randomHex(6))
	body, _ := json.Marshal(map[string]any{"sku": sku, "name": "replay " + scenario, "price": price, "currency": "IDR", "stock": stock})
	var problem map[string]any
	status, err := c.do(ctx, "POST", "/api/products", nil, body, &problem)
	if err != nil {
		return "", err
	}
	if status != http.StatusCreated {
		return "", fmt.Errorf("create product: %d %v (is ADMIN_API_TOKEN set on the server and -token given?)", status, problem)
	}
	return sku, nil
}

// createOrder orders qty of sku and returns the order id.
func (c *client) createOrder(ctx context.Context, sku string, qty int) (string, int, error) {
	var o struct {
		ID string `json:"id"`
	}
	body := fmt.Sprintf(`{"customer_email":"replay@example.com","items":[{"sku":%q,"qty":%d}]}`, sku, qty)
	status, err := c.do(ctx, "POST", "/api/orders", http.Header{"Idempotency-Key": {randomHex(12)}}, []byte(body), &o)
	if err != nil {
		return "", status, err
	}
	if status != http.StatusCreated {
		return "", status, fmt.Errorf("create order: %d", status)
	}
	return o.ID, status, nil
}

// AuditReport is what GET /api/audit answers.
type AuditReport struct {
	OK         bool `json:"ok"`
	Drained    bool `json:"drained"`
	Violations []struct {
		Check  string `json:"check"`
		Detail string `json:"detail"`
	} `json:"violations"`
	Checked []string `json:"checked"`
}

func (c *client) audit(ctx context.Context, drain time.Duration) (AuditReport, error) {
	var r AuditReport
	status, err := c.do(ctx, "GET", "/api/audit?drain_timeout="+drain.String(), nil, nil, &r)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("audit: HTTP %d", status)
	}
	return r, err
}

// notification is a callback shot of the fact, in the gateway's format,
// or nil when the gateway has no notification of its status. The fact
// happened: where the gateway's notifications are confirmed with its
// API, the API learns it first (tell).
func (c *client) notification(f payments.Fact, allowed ...int) *shot {
	return c.callback(f, true, allowed...)
}

// untrue is a notification of a fact that did not happen — a changed
// copy of an event, meant to conflict: the gateway's API never learns it.
func (c *client) untrue(f payments.Fact, allowed ...int) *shot {
	return c.callback(f, false, allowed...)
}

func (c *client) callback(f payments.Fact, happened bool, allowed ...int) *shot {
	f.Currency = "IDR"
	body, err := c.send.Body(f)
	if err != nil {
		return nil
	}
	tag := f.EventID
	if c.send.Provider() == midtrans.Name {
		f.EventID = "" // Midtrans has none: its key is the transaction and its status
	}
	if t, ok := c.send.(payments.Teller); ok && happened {
		c.tell(t, f, body)
	}
	return &shot{method: "POST", path: "/callbacks/" + c.send.Provider(), event: f.EventID, notification: true,
		tag: tag, allowed: allowed, body: body}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// tell tells the server's sandbox gateway, which stands in for the API
// that Sekali confirms the gateway's notifications with, that the fact of
// a notification happened (payments.Teller) — as a real payment exists
// at the gateway before its notification. A notification of a payment the
// API does not know is answered "unconfirmed" and changes nothing. The
// server needs SANDBOX_GATEWAY=on, with the gateway's API URL at the
// sandbox gateway (Midtrans's by default; XENDIT_API_URL set to it).
func (c *client) tell(t payments.Teller, f payments.Fact, body []byte) {
	err := c.told(t, f, body)
	if err != nil {
		c.mu.Lock()
		if c.registerErr == nil {
			c.registerErr = fmt.Errorf("making %s transaction %s known to the sandbox gateway: %w "+
				"(replaying %[1]s needs SANDBOX_GATEWAY=on on the server, with its API URL at the sandbox gateway)",
				c.send.Provider(), f.TransactionID, err)
		}
		c.mu.Unlock()
	}
}

// told sends the request that tells the sandbox gateway of f, if any,
// and expects 204.
func (c *client) told(t payments.Teller, f payments.Fact, body []byte) error {
	req, err := t.Tell(f, body)
	if err != nil || req == nil {
		return err
	}
	if req.URL, err = url.Parse(c.base + req.URL.String()); err != nil {
		return err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusNoContent {
		return fmt.Errorf("HTTP %d", res.StatusCode)
	}
	return nil
}

// registrationError is the first failure of tell, once.
func (c *client) registrationError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.registerErr
	c.registerErr = nil
	return err
}
