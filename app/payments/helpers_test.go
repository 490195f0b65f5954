package payments_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sekali/sekali/app/gateways/midtrans"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func TestMain(m *testing.M) {
	midtransAPI = newFakeMidtrans()
	code := m.Run()
	midtransAPI.srv.Close()
	os.Exit(code)
}

// midtransAPI is Midtrans's status API as these tests need it: the state
// of each transaction is the last genuine notification a test made of it
// (midtransNotification), and GET /v2/{transaction_id}/status answers
// with it, as Midtrans does. Transaction ids are unique per test, so the
// tests share it.
var midtransAPI *fakeMidtrans

type fakeMidtrans struct {
	srv  *httptest.Server
	down atomic.Bool // answer 503, as an API in trouble
	// errInBody, when set, is the status_code answered with HTTP 200:
	// Midtrans's way of saying most errors.
	errInBody atomic.Pointer[string]
	mu        sync.Mutex
	tx        map[string][]byte
}

func newFakeMidtrans() *fakeMidtrans {
	f := &fakeMidtrans{tx: map[string][]byte{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, _, ok := r.BasicAuth(); !ok || user != midtransKey {
			http.Error(w, `{"status_code":"401"}`, http.StatusUnauthorized)
			return
		}
		if f.down.Load() {
			http.Error(w, `{"status_code":"503"}`, http.StatusServiceUnavailable)
			return
		}
		if code := f.errInBody.Load(); code != nil {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"status_code":"` + *code + `","status_message":"Sorry. Our system is recovering from unexpected issues. Please retry."}`))
			return
		}
		f.mu.Lock()
		body, ok := f.tx[r.PathValue("id")]
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.Write([]byte(`{"status_code":"404","status_message":"Transaction doesn't exist."}`))
			return
		}
		answer, _ := midtrans.StatusAnswer(body)
		w.Write(answer)
	}))
	mux := http.NewServeMux()
	mux.Handle("GET /v2/{id}/status", f.srv.Config.Handler)
	f.srv.Config.Handler = mux
	return f
}

// set makes a signed notification the state of its transaction.
func (f *fakeMidtrans) set(notification []byte) {
	var n midtrans.Notification
	json.Unmarshal(notification, &n)
	f.mu.Lock()
	f.tx[n.TransactionID] = notification
	f.mu.Unlock()
}

// URL is where the API answers.
func (f *fakeMidtrans) URL() string { return f.srv.URL }
