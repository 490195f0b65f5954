package stripe

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strings"

	stripego "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/form"

	"github.com/sekali/sekali/app/gateways/httpjson"
)

// api is the part of Stripe's API that Sekali calls — create and list
// Checkout Sessions; create, list and read refunds — each as stripe-go's own
// service makes it: its params and types, Backend.Call, its
// Idempotency-Key, its retries (none: see backendConfig) and its errors
// (*stripego.Error). stripego.NewClient would build all of stripe-go's
// ~150 services, and the binary would keep every one of their methods:
// 6.7 MB more in cmd/sekali (5 MB stripped) for five calls.
type api struct {
	backend stripego.Backend
	key     string
}

// newAPI is the API at baseURL (Stripe's own when empty; a path is
// allowed) for a secret or restricted key.
func newAPI(secretKey, baseURL string) (*api, error) {
	cfg, err := backendConfig(secretKey, baseURL)
	if err != nil {
		return nil, err
	}
	return &api{backend: stripego.GetBackendWithConfig(stripego.APIBackend, cfg), key: secretKey}, nil
}

// createSession is POST /v1/checkout/sessions.
func (a *api) createSession(ctx context.Context, p *stripego.CheckoutSessionCreateParams) (*stripego.CheckoutSession, error) {
	p.Context = ctx
	cs := &stripego.CheckoutSession{}
	return cs, a.backend.Call(http.MethodPost, "/v1/checkout/sessions", a.key, p, cs)
}

// createRefund is POST /v1/refunds.
func (a *api) createRefund(ctx context.Context, p *stripego.RefundCreateParams) (*stripego.Refund, error) {
	p.Context = ctx
	re := &stripego.Refund{}
	return re, a.backend.Call(http.MethodPost, "/v1/refunds", a.key, p, re)
}

// refund is GET /v1/refunds/{id}.
func (a *api) refund(ctx context.Context, id string, p *stripego.RefundRetrieveParams) (*stripego.Refund, error) {
	p.Context = ctx
	re := &stripego.Refund{}
	return re, a.backend.Call(http.MethodGet, stripego.FormatURLPath("/v1/refunds/%s", id), a.key, p, re)
}

// refunds is GET /v1/refunds, page after page (listAll).
func (a *api) refunds(ctx context.Context, p *stripego.RefundListParams) iter.Seq2[*stripego.Refund, error] {
	return listAll(ctx, a, "/v1/refunds", p, func(re *stripego.Refund) string { return re.ID })
}

// sessions is GET /v1/checkout/sessions, page after page (listAll).
func (a *api) sessions(ctx context.Context, p *stripego.CheckoutSessionListParams) iter.Seq2[*stripego.CheckoutSession, error] {
	return listAll(ctx, a, "/v1/checkout/sessions", p, func(cs *stripego.CheckoutSession) string { return cs.ID })
}

// listPage is one page of a Stripe list of T.
type listPage[T any] struct {
	stripego.APIResource
	stripego.ListMeta
	Data []T `json:"data"`
}

// listAll is a GET of the Stripe list at path, page after page
// (starting_after the id of the last object of the page before), as
// stripe-go's List iterates them: an error is the last value. A list's
// params go to CallRaw encoded, as stripe-go's List sends them: Call
// reads every params type as having Metadata.
func listAll[T any](ctx context.Context, a *api, path string, params any, id func(T) string) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var none T
		q := &form.Values{}
		form.AppendTo(q, params)
		for {
			page := &listPage[T]{}
			if err := a.backend.CallRaw(http.MethodGet, path, a.key, []byte(q.Encode()), &stripego.Params{Context: ctx}, page); err != nil {
				yield(none, err)
				return
			}
			for _, o := range page.Data {
				if !yield(o, nil) {
					return
				}
			}
			if !page.HasMore || len(page.Data) == 0 {
				return
			}
			q.Set(stripego.StartingAfter, id(page.Data[len(page.Data)-1]))
		}
	}
}

// backendConfig is how Sekali's calls to Stripe are made: no retries of
// stripe-go's own (the caller repeats, with the same idempotency key), no
// logs (the caller logs what it returns), every request ended within
// httpjson.DefaultTimeout, at baseURL.
func backendConfig(secretKey, baseURL string) (*stripego.BackendConfig, error) {
	if err := CheckSecretKey(secretKey); err != nil {
		return nil, err
	}
	httpClient := httpjson.NewClient(httpjson.DefaultTimeout)
	cfg := &stripego.BackendConfig{
		HTTPClient:        httpClient,
		MaxNetworkRetries: stripego.Int64(0),
		LeveledLogger:     &stripego.LeveledLogger{Level: stripego.LevelNull},
	}
	if baseURL != "" {
		u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("stripe API URL %q is not an http(s) URL", baseURL)
		}
		cfg.URL = stripego.String(u.Scheme + "://" + u.Host)
		// stripe-go trims one trailing /v1 from its base URL: so does
		// the prefix.
		if prefix := strings.TrimSuffix(u.Path, "/v1"); prefix != "" {
			httpClient.Transport = prefixPath{prefix: prefix, next: http.DefaultTransport}
		}
	}
	return cfg, nil
}

// prefixPath puts prefix before the path of each request. stripe-go v82
// takes a base URL without a path only: it reads the API version from
// the request's path, which must begin /v1 (it sends the request, then
// fails on the answer). So stripe-go is given the scheme and host, and
// the path of the base URL is added here, below it.
type prefixPath struct {
	prefix string
	next   http.RoundTripper
}

func (p prefixPath) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Path = p.prefix + r.URL.Path
	if r.URL.RawPath != "" {
		r.URL.RawPath = p.prefix + r.URL.RawPath
	}
	return p.next.RoundTrip(r)
}

// NewAPIClient is stripe-go's whole client of the API at baseURL, made as
// api makes its calls, for the tests and QA tools that read what an
// emulated Stripe made. Sekali itself calls api: with this client
// reachable from cmd/sekali the binary keeps all of stripe-go's services.
func NewAPIClient(secretKey, baseURL string) (*stripego.Client, error) {
	cfg, err := backendConfig(secretKey, baseURL)
	if err != nil {
		return nil, err
	}
	return stripego.NewClient(secretKey, stripego.WithBackends(stripego.NewBackendsWithConfig(cfg))), nil
}
