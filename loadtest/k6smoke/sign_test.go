package k6smoke

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// TestSigningMatchesSekaliSign checks the signing of loadtest/k6/lib/sekali.js
// against `sekali sign`, the Go code the server's own tests and the
// replayer sign with, for every gateway format the scripts speak: on fixed
// inputs and a fixed clock, the headers callbackParams() sends (Standard
// Webhooks for the sandbox, Xendit's callback token, Stripe-Signature) are
// byte-for-byte `sekali sign`'s, and a Midtrans body with the
// signature_key the script computed is the body `sekali sign` writes. The
// sandbox's development secret is checked too: the script's default and
// the server's must be the same secret.
func TestSigningMatchesSekaliSign(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/sekali to compare its signatures: make test runs it")
	}
	t.Parallel()
	bin := sekaliBinary(t)
	at := time.Unix(1767225600, 0) // 2026-01-01T00:00:00Z
	for _, tc := range []struct {
		provider, variable, secret string
		statuses                   []string
	}{
		{"sandbox", "SANDBOX_WEBHOOK_SECRET", sandboxSecret, []string{"paid", "pending", "failed", "expired"}},
		{"sandbox", "", "", []string{"paid"}}, // the development secret on both sides
		{"midtrans", "MIDTRANS_SERVER_KEY", midtransKey, []string{"paid", "pending", "failed", "expired"}},
		{"xendit", "XENDIT_CALLBACK_TOKEN", xenditToken, []string{"paid", "pending", "expired"}},
		{"stripe", "STRIPE_WEBHOOK_SECRET", stripeSecret + ",whsec_second_secret_of_a_rotation", []string{"paid", "pending", "failed"}},
	} {
		name := tc.provider
		if tc.secret == "" {
			name += "-development-secret"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sandbox := &statusAPI{}
			api := httptest.NewServer(sandbox)
			defer api.Close()
			env := map[string]string{"ADMIN_API_TOKEN": "unused", "PROVIDER": tc.provider, "BASE_URL": api.URL}
			if tc.variable != "" {
				env[tc.variable] = tc.secret
			}
			lib := loadLibrary(t, env, at)
			for _, status := range tc.statuses {
				id := "evt-sign-" + status
				ev := map[string]any{"order_id": "ORD-01SIGNTEST", "transaction_id": "tx-sign-" + status,
					"payment_status": status, "paid_amount": 150000, "currency": "IDR"}
				if status != "paid" {
					ev["paid_amount"] = 0
				}
				body := lib.call(t, "eventBody", id, ev).String()
				headers := lib.call(t, "callbackParams", id, body).ToObject(lib.rt).Get("headers").ToObject(lib.rt)

				toSign := body
				if tc.provider == "midtrans" {
					// sekali sign prints a Midtrans body only when signing
					// changes it: it gets the script's body with the
					// signature blanked, and must write the script's back.
					var fields map[string]any
					if err := json.Unmarshal([]byte(body), &fields); err != nil || fields["signature_key"] == "" {
						t.Fatalf("%s: the script's Midtrans body has no signature_key: %s", status, body)
					}
					toSign = strings.Replace(body, `"signature_key":"`+fields["signature_key"].(string)+`"`, `"signature_key":""`, 1)
				}
				args := []string{"sign", "--provider", tc.provider, "--id", id, "--body", toSign, "--timestamp", strconv.FormatInt(at.Unix(), 10)}
				var out, errs bytes.Buffer
				cmd := exec.Command(bin, args...)
				cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
				if tc.variable != "" {
					cmd.Env = append(cmd.Env, tc.variable+"="+tc.secret)
				}
				cmd.Stdout, cmd.Stderr = &out, &errs
				if err := cmd.Run(); err != nil {
					t.Fatalf("sekali %s: %v\n%s", strings.Join(args, " "), err, errs.String())
				}

				if tc.provider == "midtrans" {
					// The signature is inside the body: sekali sign's
					// signature_key must be the one the script put there.
					if got := strings.TrimSuffix(out.String(), "\n"); got != body {
						t.Errorf("%s: the script's body\n  %s\nsekali sign's\n  %s", status, body, got)
					}
					if len(headers.Keys()) != 1 || headers.Get("Content-Type") == nil {
						t.Errorf("%s: Midtrans signs no header, the script sends %v", status, headers.Keys())
					}
					continue
				}
				want := map[string]string{}
				for line := range strings.Lines(out.String()) {
					k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
					if !ok {
						t.Fatalf("sekali sign printed %q", line)
					}
					want[k] = v
				}
				got := map[string]string{}
				for _, k := range headers.Keys() {
					if !strings.EqualFold(k, "Content-Type") {
						got[strings.ToLower(k)] = headers.Get(k).String()
					}
				}
				if len(want) == 0 || !equalMaps(got, want) {
					t.Errorf("%s: the script's headers %v, sekali sign's %v", status, got, want)
				}
			}
			// Where Sekali confirms a notification with the gateway's
			// API, the sandbox's stand-in for that API is told of it
			// first, with the secret, as the Go replayer does
			// (payments.Teller): Midtrans's every notification but a
			// pending one, with the server key as the basic-auth user;
			// Xendit's paid callback, with its token.
			switch tc.provider {
			case "midtrans":
				want := "Basic " + base64.StdEncoding.EncodeToString([]byte(tc.secret+":"))
				if len(sandbox.calls) != 3 {
					t.Fatalf("%d calls to the status API, want one per status but pending: %v", len(sandbox.calls), sandbox.calls)
				}
				for _, c := range sandbox.calls {
					if c.auth != want || c.method != http.MethodPut || !strings.HasPrefix(c.path, "/sandbox/midtrans/v2/tx-sign-") {
						t.Errorf("status API call %+v, want PUT /sandbox/midtrans/v2/{tx}/status as %q", c, want)
					}
				}
			case "xendit":
				if len(sandbox.calls) != 1 {
					t.Fatalf("%d calls to the invoice API, want one, of the payment: %v", len(sandbox.calls), sandbox.calls)
				}
				if c := sandbox.calls[0]; c.token != tc.secret || c.method != http.MethodPut || c.path != "/sandbox/xendit/v2/invoices/tx-sign-paid" ||
					!strings.Contains(c.body, `"status":"PAID"`) {
					t.Errorf("invoice API call %+v, want PUT /sandbox/xendit/v2/invoices/tx-sign-paid of the PAID callback with its token", c)
				}
			default:
				if len(sandbox.calls) != 0 {
					t.Errorf("%s tells the sandbox gateway %v, want nothing", tc.provider, sandbox.calls)
				}
			}
		})
	}
}

// library is loadtest/k6/lib/sekali.js loaded in a runtime of its own,
// its exports callable.
type library struct {
	*vu
}

// loadLibrary bundles the scripts' library and runs its init code with
// env as __ENV and a clock stopped at at; its functions may then make
// requests, as from setup().
func loadLibrary(t *testing.T, env map[string]string, at time.Time) library {
	t.Helper()
	prog, err := bundle("../k6/lib/sekali.js")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &run{cfg: Config{Env: env, Now: func() time.Time { return at }, Log: testWriter{t, ""}}, prog: prog, ctx: ctx, cancel: cancel,
		metrics: newRegistry(), checks: map[string]*checkCount{}, opts: options{batch: 20, batchPerHost: 6}}
	v, err := r.newVU(0)
	if err != nil {
		t.Fatalf("loading the library: %s", errorText(err))
	}
	v.stage = stageSetup
	return library{v}
}

func (l library) call(t *testing.T, name string, args ...any) goja.Value {
	t.Helper()
	fn, ok := l.function(name)
	if !ok {
		t.Fatalf("the library exports no function %s", name)
	}
	vals := make([]goja.Value, len(args))
	for i, a := range args {
		vals[i] = l.rt.ToValue(a)
	}
	res, err := l.vu.call(fn, name, vals...)
	if err != nil {
		t.Fatalf("%s: %s", name, errorText(err))
	}
	return res
}

// statusAPI stands in for the server's sandbox gateway in the signing
// test: it records each call and answers 204, as the sandbox does.
type statusAPI struct {
	mu    sync.Mutex
	calls []apiCall
}

type apiCall struct{ method, path, auth, token, body string }

func (s *statusAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.calls = append(s.calls, apiCall{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("X-Callback-Token"), string(b)})
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
