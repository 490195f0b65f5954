package midtrans

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/sekali/sekali/app/gateways/emulation"
	"github.com/sekali/sekali/app/payments"
)

// The Emulator speaks, at SandboxAPIPath of the sandbox gateway — where
// MIDTRANS_API_URL and MIDTRANS_SNAP_URL point by default while the
// sandbox gateway is on — the Midtrans calls Sekali makes, with the
// server key as the basic-auth user, in Midtrans's shapes: the status
// API (here), Snap and refunds (emulator_api.go).
//
// Sekali confirms every Midtrans notification with Midtrans's status API
// (its signature covers three fields only). So that the QA panel's
// Midtrans format works where the sandbox gateway runs, the emulation
// answers as that API for the transactions the sandbox gateway sent in
// that format (Notified). The replayer and the k6 scripts, which send
// Midtrans notifications of their own, first tell it the transaction's
// state with a PUT of the signed notification.

// keptTransactions bounds the Midtrans transactions the status API
// remembers.
const keptTransactions = 100_000

// Emulator is the Midtrans emulation's state (payments.Emulator).
type Emulator struct {
	sender Sender // signs its refund notifications; its server key is the callers'

	mu sync.Mutex
	// notified is what the status API answers: the signed notification
	// of each transaction id, and of each order id its latest;
	// notifiedOrder lists the pairs, oldest first, for eviction.
	notified      map[string][]byte
	notifiedOrder []string
	snaps         *emulation.Kept[string]            // token by order id
	refundKeys    *emulation.Kept[bool]              // the refund keys used
	refunded      *emulation.Kept[[]payments.Refund] // the refunds made, by transaction id
	// settled is each refunded transaction as it was settled: its
	// refund notifications replace it in the status API.
	settled *emulation.Kept[Notification]
	nextID  int64 // the next refund_chargeback_id
	// Misstate makes the answers of refunds state another refund_amount
	// or currency than they were made with (MisstateNext). Snap's answer
	// states no amount: there is nothing there to misstate.
	emulation.Misstate
}

// NewEmulator answers as Midtrans's API and Snap to callers that
// authenticate with serverKey, as Midtrans answers Sekali with
// MIDTRANS_SERVER_KEY.
func NewEmulator(serverKey string) *Emulator {
	return &Emulator{sender: Sender{serverKey: serverKey}, notified: map[string][]byte{},
		snaps:      emulation.NewKept[string](keptMidtrans),
		refundKeys: emulation.NewKept[bool](keptMidtrans),
		refunded:   emulation.NewKept[[]payments.Refund](keptMidtrans),
		settled:    emulation.NewKept[Notification](keptMidtrans),
		nextID:     1,
	}
}

// Provider implements payments.Emulator.
func (*Emulator) Provider() string { return Name }

// Path implements payments.Emulator.
func (*Emulator) Path() string { return SandboxAPIPath }

// Handler implements payments.Emulator. The fault switches apply to the
// calls that act (Snap's create, a refund); the status API is never
// faulted.
func (m *Emulator) Handler(sb payments.Sandbox) http.Handler {
	acts := func(failed emulation.Answer, call func(r *http.Request) emulation.Answer) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			sb.Call(w, r, failed.Body, func() (int, http.Header, []byte) {
				a := call(r)
				return a.Status, a.Header, a.Body
			})
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/{id}/status", m.status)
	mux.HandleFunc("PUT /v2/{id}/status", m.setStatus)
	mux.Handle("POST /snap/v1/transactions", acts(snapError(http.StatusInternalServerError, midtransFailed),
		func(r *http.Request) emulation.Answer { return m.createSnap(r, sb) }))
	mux.Handle("POST /v2/{id}/refund", acts(coreError(http.StatusInternalServerError, midtransFailed),
		func(r *http.Request) emulation.Answer { return m.refund(r, sb) }))
	return mux
}

// Reported implements payments.Emulator: Midtrans's refunds take what
// its status API says was settled (Notified).
func (*Emulator) Reported(payments.Fact) {}

// Notified implements payments.Emulator: the notification the sandbox
// gateway sends is, from now on, the state of its transaction and its
// order that the status API answers with.
func (m *Emulator) Notified(_ payments.Fact, body []byte) {
	var n Notification
	if json.Unmarshal(body, &n) != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.remember(n, body)
}

// status is GET /v2/{id}/status, with the server key as the basic-auth
// user: the latest notification of the transaction (or of the order's
// latest transaction) in the status API's shape; Midtrans's 404 body
// (with HTTP 200, as Midtrans answers) when it has none.
func (m *Emulator) status(w http.ResponseWriter, r *http.Request) {
	if !m.sender.Authorizes(r) {
		emulation.JSON(http.StatusUnauthorized, map[string]string{"status_code": "401",
			"status_message": "Access denied due to unauthorized transaction, please check client or server key"}).Write(w)
		return
	}
	m.mu.Lock()
	body, found := m.notified[r.PathValue("id")]
	m.mu.Unlock()
	if !found {
		emulation.JSON(http.StatusOK, map[string]string{"status_code": "404", "status_message": "Transaction doesn't exist."}).Write(w)
		return
	}
	answer, err := StatusAnswer(body)
	if err != nil {
		coreError(http.StatusInternalServerError, midtransFailed).Write(w)
		return
	}
	emulation.Answer{Status: http.StatusOK, Body: answer}.Write(w)
}

// setStatus is PUT /v2/{id}/status with a signed Midtrans notification
// of transaction {id} as its body and the server key as the basic-auth
// user: from now on the status API answers with it. (Not Midtrans's
// API: how a QA tool that sends Midtrans notifications itself makes
// their transactions exist.)
func (m *Emulator) setStatus(w http.ResponseWriter, r *http.Request) {
	if !m.sender.Authorizes(r) {
		emulation.JSON(http.StatusUnauthorized, map[string]string{"error": "the server key is the basic-auth user"}).Write(w)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, payments.MaxBodyBytes+1))
	if err != nil || len(body) > payments.MaxBodyBytes {
		emulation.JSON(http.StatusRequestEntityTooLarge, map[string]string{"error": "the notification is too large"}).Write(w)
		return
	}
	var n Notification
	if json.Unmarshal(body, &n) != nil || n.TransactionID != r.PathValue("id") || n.OrderID == "" {
		emulation.JSON(http.StatusUnprocessableEntity, map[string]string{"error": "the body must be a Midtrans notification of this transaction"}).Write(w)
		return
	}
	m.mu.Lock()
	m.remember(n, body)
	m.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// remember keeps the notification as the state of its transaction and
// its order, bounded: the oldest transaction leaves first. Called with
// the lock held.
func (m *Emulator) remember(n Notification, body []byte) {
	body = bytes.Clone(body)
	if _, ok := m.notified[n.TransactionID]; !ok {
		m.notifiedOrder = append(m.notifiedOrder, n.TransactionID, n.OrderID)
		if len(m.notifiedOrder) > 2*keptTransactions {
			delete(m.notified, m.notifiedOrder[0])
			delete(m.notified, m.notifiedOrder[1])
			m.notifiedOrder = m.notifiedOrder[2:]
		}
	}
	m.notified[n.TransactionID] = body
	m.notified[n.OrderID] = body
}

// latest is the latest notification the status API knows of a
// transaction or order id. Called with the lock held.
func (m *Emulator) latest(id string) (Notification, bool) {
	body, ok := m.notified[id]
	var n Notification
	if !ok || json.Unmarshal(body, &n) != nil {
		return n, false
	}
	return n, true
}
