package sandboxgw_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/sandboxgw"
	"github.com/sekali/sekali/web/sandboxgw/sandboxgwtest"
)

// What the sandbox gateway gives every emulation of a gateway's API
// (payments.Sandbox), and what it tells it (payments.Emulator), shown
// with an emulation of a made-up gateway; each real one is tested in its
// package (app/gateways/{name}/emulator_test.go).

// fakeEmulator emulates gateway name below /sandbox/{name}:
//
//   - POST /act acts (counted), through the fault switches;
//   - GET /where answers the path it was asked at and the pay page of
//     order ORD-FAKE~2 (a request key of ORD-FAKE);
//   - POST /later answers whether a refund accepted now fails later;
//   - POST /notify?n= has the sandbox send n notifications of ORD-FAKE~1
//     in its format, in order.
type fakeEmulator struct {
	name string
	mu   sync.Mutex
	acts int
	// told lists what the sandbox told it: "notified <event id>" with
	// the body it is about to send, and "reported <event id>".
	told   []string
	bodies map[string][]byte // notified, by event id
}

func newFakeEmulator(name string) *fakeEmulator {
	return &fakeEmulator{name: name, bodies: map[string][]byte{}}
}

func (f *fakeEmulator) Provider() string { return f.name }
func (f *fakeEmulator) Path() string     { return "/sandbox/" + f.name }

func (f *fakeEmulator) Reported(fact payments.Fact) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.told = append(f.told, "reported "+fact.EventID)
}

func (f *fakeEmulator) Notified(fact payments.Fact, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.told = append(f.told, "notified "+fact.EventID)
	f.bodies[fact.EventID] = bytes.Clone(body)
}

func (f *fakeEmulator) Handler(sb payments.Sandbox) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /act", func(w http.ResponseWriter, r *http.Request) {
		sb.Call(w, r, []byte(`{"error":"failed on purpose"}`), func() (int, http.Header, []byte) {
			f.mu.Lock()
			f.acts++
			f.mu.Unlock()
			return http.StatusCreated, http.Header{"Fake-Header": {"set"}}, []byte(`{"acted":true}`)
		})
	})
	mux.HandleFunc("GET /where", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"path": r.URL.Path,
			"page": sb.PayURL(r, "ORD-FAKE~2", "https://shop.example/orders/ORD-FAKE?t=tok")})
	})
	mux.HandleFunc("POST /later", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strconv.FormatBool(sb.FailLater())))
	})
	mux.HandleFunc("POST /notify", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		var facts []payments.Fact
		for i := range n {
			facts = append(facts, payments.Fact{EventID: "evt-" + strconv.Itoa(i+1), OrderID: "ORD-FAKE~1", TransactionID: "tx-fake",
				Status: models.EventRefunded, Amount: int64(i + 1), Currency: "IDR", RefundID: "rf-fake"})
		}
		sb.Notify("asked through the fake API", facts...)
		w.WriteHeader(http.StatusAccepted)
	})
	return mux
}

func (f *fakeEmulator) tellings() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.told)
}

func (f *fakeEmulator) acted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acts
}

// keyedSender is a format whose notifications carry no event id: its
// deliveries are listed by the key it derives (as some gateways' are).
type keyedSender struct{ stubSender }

func (keyedSender) Key(f payments.Fact) string { return f.TransactionID + ":" + string(f.Status) }

// sekaliStandIn receives the sandbox's deliveries as Sekali would,
// answering 200; each, when it arrives, with what the emulation had been
// told by then.
type sekaliStandIn struct {
	em   *fakeEmulator
	mu   sync.Mutex
	got  []string // the event ids, in the order they came
	told [][]string
	path []string
	body [][]byte
}

func (s *sekaliStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.got = append(s.got, r.Header.Get("Stub-Event"))
	s.told = append(s.told, s.em.tellings())
	s.path = append(s.path, r.URL.Path)
	s.body = append(s.body, body)
	s.mu.Unlock()
	w.Write([]byte(`{"result":"processed"}`))
}

func (s *sekaliStandIn) received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// An emulation answers below its path, the path stripped, with the
// sandbox's fault switches around what acts: FailNext answers its 500
// before it acts, TimeOutAfterActing acts and answers nothing; an answer
// keeps the emulation's headers, as JSON. Its pay page is the sandbox's,
// of the order a request key names, on the host (and scheme) it was
// asked at, paying in its format. FailRefundsLater counts down its
// refunds.
func TestEmulationIsServedWithTheFaultSwitches(t *testing.T) {
	t.Parallel()
	em := newFakeEmulator("fakegw")
	g := sandboxgwtest.New(t, "")
	g.Emulate(em)
	base := sandboxgwtest.Serve(t, g)
	call := func(ctx context.Context, method, path string, header http.Header) (*http.Response, []byte, error) {
		req, _ := http.NewRequestWithContext(ctx, method, base+"/sandbox/fakegw"+path, nil)
		for k, vs := range header {
			req.Header[k] = vs
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res, b, err
	}
	where := func(header http.Header) map[string]string {
		t.Helper()
		_, b, err := call(t.Context(), http.MethodGet, "/where", header)
		var answer map[string]string
		if err != nil || json.Unmarshal(b, &answer) != nil {
			t.Fatalf("GET /where: %s, %v", b, err)
		}
		return answer
	}
	if got := where(nil); got["path"] != "/where" || got["page"] != base+"/sandbox/pay/ORD-FAKE?t=tok&via=fakegw" {
		t.Errorf("GET /where: %v; want the path below /sandbox/fakegw and the pay page of ORD-FAKE at %s", got, base)
	}
	if got := where(http.Header{"X-Forwarded-Proto": {"https"}}); !strings.HasPrefix(got["page"], "https://") {
		t.Errorf("asked through a TLS proxy: the page is %s, want https", got["page"])
	}
	if res, _, err := call(t.Context(), http.MethodGet, "/act", nil); err != nil || res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /act: %v %v, want 405", res, err)
	}

	g.Faults().FailNext(1)
	res, b, err := call(t.Context(), http.MethodPost, "/act", nil)
	if err != nil || res.StatusCode != http.StatusInternalServerError || string(b) != `{"error":"failed on purpose"}` || em.acted() != 0 {
		t.Errorf("FailNext: %v %s %v, acted %d; want the emulation's 500, before it acts", res, b, err, em.acted())
	}
	res, b, err = call(t.Context(), http.MethodPost, "/act", nil)
	if err != nil || res.StatusCode != http.StatusCreated || string(b) != `{"acted":true}` || res.Header.Get("Fake-Header") != "set" ||
		res.Header.Get("Content-Type") != "application/json" || em.acted() != 1 {
		t.Errorf("the next call: %v %s %v, acted %d; want its answer, as JSON", res, b, err, em.acted())
	}

	g.Faults().TimeOutAfterActing(1)
	ctx, giveUp := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, _, err := call(ctx, http.MethodPost, "/act", nil)
		done <- err
	}()
	testenv.Eventually(t, "the emulation acted and the sandbox holds its answer", func() bool { return g.Faults().Held() == 1 })
	giveUp()
	if err := <-done; err == nil || em.acted() != 2 {
		t.Errorf("TimeOutAfterActing: %v, acted %d; want no answer after acting", err, em.acted())
	}
	testenv.Eventually(t, "the held call let go", func() bool { return g.Faults().Held() == 0 })

	g.Faults().FailRefundsLater(1)
	for i, want := range []string{"true", "false"} {
		if _, b, err := call(t.Context(), http.MethodPost, "/later", nil); err != nil || string(b) != want {
			t.Errorf("refund %d fails later: %s %v, want %s", i+1, b, err, want)
		}
	}
	if n := g.Faults().FailedLater(); n != 1 {
		t.Errorf("FailedLater %d, want 1", n)
	}
}

// An emulation's notifications are sent in its gateway's format, where
// the sandbox speaks it: in the order given, each once answered,
// listed under the order its request key names, by the key its sender
// derives when the format has no event ids. The emulation is told of
// each notification the sandbox sends in its format — the QA panel's
// too — before it is sent, with the body sent (Notified), and of each
// payment (Reported); never of the panel's conflicting copies, which
// say what did not happen.
func TestEmulationIsToldWhatTheSandboxSends(t *testing.T) {
	t.Parallel()
	em := newFakeEmulator("fakegw")
	sekali := &sekaliStandIn{em: em}
	srv := httptest.NewServer(sekali)
	t.Cleanup(srv.Close)
	g := sandboxgwtest.New(t, srv.URL)
	g.Speak(keyedSender{stubSender{provider: "fakegw"}})
	g.Emulate(em)
	mute := newFakeEmulator("mutegw") // the sandbox does not speak its format
	g.Emulate(mute)
	base := sandboxgwtest.Serve(t, g)
	for _, path := range []string{"/sandbox/fakegw/notify?n=3", "/sandbox/mutegw/notify?n=1"} {
		res, err := http.Post(base+path, "application/json", nil)
		if err != nil || res.StatusCode != http.StatusAccepted {
			t.Fatalf("POST %s: %v %v", path, res, err)
		}
		res.Body.Close()
	}
	// Received by Sekali, and their answers recorded by the sandbox
	// (which happens after Sekali has the request).
	testenv.Eventually(t, "three notifications received and answered", func() bool {
		return sekali.received() == 3 && len(g.Deliveries("ORD-FAKE")) == 3
	})
	sekali.mu.Lock()
	got, told, paths, bodies := slices.Clone(sekali.got), slices.Clone(sekali.told), slices.Clone(sekali.path), slices.Clone(sekali.body)
	sekali.mu.Unlock()
	if !slices.Equal(got, []string{"evt-1", "evt-2", "evt-3"}) {
		t.Errorf("received %v, want evt-1, evt-2, evt-3 in that order", got)
	}
	for i := range got {
		if paths[i] != "/callbacks/fakegw" || !slices.Contains(told[i], "notified "+got[i]) || !bytes.Equal(em.bodies[got[i]], bodies[i]) {
			t.Errorf("delivery %d to %s: the emulation had been told %v (body %s); want told of %s, with the body sent (%s)",
				i+1, paths[i], told[i], em.bodies[got[i]], got[i], bodies[i])
		}
	}
	ds := g.Deliveries("ORD-FAKE")
	if len(ds) != 3 || ds[0].Format != "fakegw" || ds[0].EventID != "tx-fake:refunded" || ds[0].Note != "asked through the fake API" || ds[0].Status != http.StatusOK {
		t.Errorf("deliveries of ORD-FAKE %+v, want the three, by the sender's key, with the emulation's note", ds)
	}
	if n := len(g.Deliveries("ORD-FAKE~1")); n != 0 {
		t.Errorf("%d deliveries listed under the request key, want them under its order", n)
	}
	if told := mute.tellings(); len(told) != 0 {
		t.Errorf("the emulation of a format the sandbox does not speak was told %v", told)
	}

	// The QA panel: a payment and two conflicting copies of it.
	before := len(em.tellings())
	order := &models.Order{ID: "ORD-PANEL", TotalAmount: 1000, Currency: "IDR"}
	plan, err := g.ParsePlan("paid", "3", sandboxgw.ModeConflict, "fakegw")
	if err != nil {
		t.Fatal(err)
	}
	g.Start(order, plan)
	testenv.Eventually(t, "the three copies answered", func() bool { return len(g.Deliveries(order.ID)) == 3 })
	tellings := em.tellings()[before:]
	if len(tellings) != 2 || !strings.HasPrefix(tellings[0], "notified evt_sbx_") || tellings[1] != "reported"+strings.TrimPrefix(tellings[0], "notified") {
		t.Errorf("the QA panel's payment and its conflicting copies told the emulation %v, want the payment notified, then reported, once", tellings)
	}
}
