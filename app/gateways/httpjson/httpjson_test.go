package httpjson_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sekali/sekali/app/gateways/httpjson"
)

// Get asks for JSON with GET, the secret key as the basic-auth user and
// no password (how some gateways take it), or no Authorization at
// all without one.
func TestGetRequest(t *testing.T) {
	t.Parallel()
	for _, user := range []string{"sk_test_0123456789", ""} {
		asked := make(chan *http.Request, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked <- r
			w.Write([]byte(`[]`))
		}))
		code, body, err := httpjson.Get(context.Background(), srv.Client(), srv.URL+"/v2/invoices?external_id=ORD-1", user)
		srv.Close()
		if err != nil || code != http.StatusOK || string(body) != `[]` {
			t.Fatalf("user %q: %d %q %v", user, code, body, err)
		}
		r := <-asked
		if r.Method != http.MethodGet || r.URL.RequestURI() != "/v2/invoices?external_id=ORD-1" || r.Header.Get("Accept") != "application/json" {
			t.Errorf("user %q: %s %s, Accept %q", user, r.Method, r.URL.RequestURI(), r.Header.Get("Accept"))
		}
		got, pass, ok := r.BasicAuth()
		if user == "" && r.Header.Get("Authorization") != "" {
			t.Errorf("no user: Authorization %q sent", r.Header.Get("Authorization"))
		}
		if user != "" && (!ok || got != user || pass != "") {
			t.Errorf("basic auth %q:%q %v, want %q with no password", got, pass, ok, user)
		}
	}
}

// Post sends its body as JSON, with the same basic auth as Get.
func TestPostRequest(t *testing.T) {
	t.Parallel()
	type request struct {
		method, contentType, accept, user, pass string
		body                                    []byte
	}
	asked := make(chan request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		user, pass, _ := r.BasicAuth()
		asked <- request{r.Method, r.Header.Get("Content-Type"), r.Header.Get("Accept"), user, pass, b}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"token":"t"}`))
	}))
	defer srv.Close()
	code, body, err := httpjson.Post(t.Context(), srv.Client(), srv.URL, "SB-Mid-server-1", []byte(`{"a":1}`))
	if err != nil || code != http.StatusCreated || string(body) != `{"token":"t"}` {
		t.Fatalf("%d %q %v", code, body, err)
	}
	want := request{http.MethodPost, "application/json", "application/json", "SB-Mid-server-1", "", []byte(`{"a":1}`)}
	if r := <-asked; r.method != want.method || r.contentType != want.contentType || r.accept != want.accept ||
		r.user != want.user || r.pass != want.pass || !bytes.Equal(r.body, want.body) {
		t.Errorf("%+v, want %+v", r, want)
	}
}

// PostWith adds its header's fields to Post's request.
func TestPostWithHeader(t *testing.T) {
	t.Parallel()
	asked := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked <- r.Header
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	header := http.Header{}
	header.Set("Idempotency-key", "ORD-1-R1")
	if code, _, err := httpjson.PostWith(t.Context(), srv.Client(), srv.URL, "xnd_development_1", header, []byte(`{}`)); err != nil || code != http.StatusOK {
		t.Fatalf("%d %v", code, err)
	}
	h := <-asked
	if user, _, _ := (&http.Request{Header: h}).BasicAuth(); h.Get("Idempotency-Key") != "ORD-1-R1" ||
		h.Get("Content-Type") != "application/json" || user != "xnd_development_1" {
		t.Errorf("headers %v", h)
	}
}

// Every status is the caller's to judge: Get returns it with the answer's
// body (a gateway's error body says why) and no error.
func TestGetReturnsEveryStatusWithItsBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code int
		body string
	}{
		{http.StatusOK, `{"id":"inv-1"}`},
		{http.StatusNoContent, ``},
		{http.StatusNotFound, `{"error_code":"INVOICE_NOT_FOUND_ERROR","message":"Invoice not found"}`},
		{http.StatusUnauthorized, `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided"}}`},
		{http.StatusTooManyRequests, `{"error":{"type":"rate_limit_error"}}`},
		{http.StatusServiceUnavailable, `upstream unavailable`},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.code)
			w.Write([]byte(tc.body))
		}))
		code, body, err := httpjson.Get(context.Background(), srv.Client(), srv.URL, "key")
		srv.Close()
		if err != nil || code != tc.code || string(body) != tc.body {
			t.Errorf("HTTP %d: got %d %q %v", tc.code, code, body, err)
		}
	}
}

// An answer is read up to MaxBody bytes and no further, however long.
func TestGetReadsAtMostMaxBody(t *testing.T) {
	t.Parallel()
	for _, size := range []int{httpjson.MaxBody - 1, httpjson.MaxBody, httpjson.MaxBody + 1, 4 * httpjson.MaxBody} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write(bytes.Repeat([]byte("a"), size))
		}))
		code, body, err := httpjson.Get(context.Background(), srv.Client(), srv.URL, "")
		srv.Close()
		if want := min(size, httpjson.MaxBody); err != nil || code != http.StatusOK || len(body) != want {
			t.Errorf("an answer of %d bytes: %d, %d bytes read, %v; want %d", size, code, len(body), err, want)
		}
	}
}

// A request that is cancelled while the gateway has not answered ends
// then, with the context's error.
func TestGetEndsWhenItsContextIsCancelled(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done() // a gateway that never answers
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	code, body, err := httpjson.Get(ctx, srv.Client(), srv.URL, "key")
	if !errors.Is(err, context.Canceled) || code != 0 || body != nil {
		t.Fatalf("%d %q %v, want context.Canceled", code, body, err)
	}
}

// A context's deadline bounds the request, and so does the client's
// timeout (NewClient), whichever comes first.
func TestGetHonoursDeadlines(t *testing.T) {
	t.Parallel()
	hang := func(t *testing.T) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	t.Run("the context's deadline", func(t *testing.T) {
		t.Parallel()
		srv := hang(t)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, _, err := httpjson.Get(ctx, httpjson.NewClient(time.Hour), srv.URL, ""); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("the client's timeout", func(t *testing.T) {
		t.Parallel()
		srv := hang(t)
		c := httpjson.NewClient(50 * time.Millisecond)
		if c.Timeout != 50*time.Millisecond {
			t.Fatalf("NewClient's timeout %s", c.Timeout)
		}
		_, _, err := httpjson.Get(context.Background(), c, srv.URL, "")
		var timeout net.Error
		if !errors.As(err, &timeout) || !timeout.Timeout() {
			t.Fatalf("%v, want a timeout", err)
		}
	})
}

// A request that cannot be made or answered is an error with no status;
// an answer cut short is an error with its status.
func TestGetErrors(t *testing.T) {
	t.Parallel()
	hangUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // no answer at all
		}
	}))
	defer hangUp.Close()
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(100))
		w.Write([]byte(`{"data":[`)) // and the connection ends
	}))
	defer cut.Close()
	for _, tc := range []struct {
		name, url string
		code      int
	}{
		{"a URL that does not parse", "http://[::1", 0},
		{"a scheme HTTP does not speak", "ftp://api.example.com/v1", 0},
		{"a server that hangs up", hangUp.URL, 0},
		{"an answer shorter than its Content-Length", cut.URL, http.StatusOK},
	} {
		code, _, err := httpjson.Get(context.Background(), http.DefaultClient, tc.url, "key")
		if err == nil || code != tc.code {
			t.Errorf("%s: %d, %v; want an error and status %d", tc.name, code, err, tc.code)
		}
	}
}
