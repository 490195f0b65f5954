package k6smoke

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// request is one HTTP request of the script, read from its arguments on
// the VU's goroutine (goja values never cross to another).
type request struct {
	method, url  string
	body         []byte
	hasBody      bool
	headers      http.Header
	tags         map[string]string
	timeout      time.Duration
	responseType string
}

// response is what came back, or the error k6 reports with status 0.
type response struct {
	req      request
	status   int
	statusT  string
	proto    string
	url      string
	headers  http.Header
	body     []byte
	err      error
	duration time.Duration
	waiting  time.Duration
}

// Params keys k6 knows; the runner implements the first four.
var paramsImplemented = map[string]bool{"headers": true, "tags": true, "timeout": true, "responseType": true}

func (v *vu) httpModule() *goja.Object {
	verb := func(method string, withBody bool) func(call goja.FunctionCall) goja.Value {
		return func(call goja.FunctionCall) goja.Value {
			var body, params goja.Value = goja.Undefined(), call.Argument(1)
			if withBody {
				body, params = call.Argument(1), call.Argument(2)
			}
			req := v.readRequest("k6/http."+strings.ToLower(method), method, call.Argument(0), body, params)
			return v.responseObject(v.do([]request{req})[0])
		}
	}
	return v.module("k6/http", map[string]any{
		"get":     verb(http.MethodGet, false),
		"head":    verb(http.MethodHead, false),
		"post":    verb(http.MethodPost, true),
		"put":     verb(http.MethodPut, true),
		"patch":   verb(http.MethodPatch, true),
		"del":     verb(http.MethodDelete, true),
		"options": verb(http.MethodOptions, true),
		"request": func(call goja.FunctionCall) goja.Value {
			req := v.readRequest("k6/http.request", strings.ToUpper(call.Argument(0).String()), call.Argument(1), call.Argument(2), call.Argument(3))
			return v.responseObject(v.do([]request{req})[0])
		},
		"batch": v.batch,
	})
}

// batch is http.batch: an array of requests (each a URL, an array
// [method, url, body, params] or an object {method, url, body, params}),
// or an object of them by name; the answers come back in the same shape.
func (v *vu) batch(call goja.FunctionCall) goja.Value {
	arg, ok := call.Argument(0).(*goja.Object)
	if !ok {
		v.throw("k6/http.batch: want an array or an object of requests")
	}
	isArray := arg.ClassName() == "Array"
	keys := arg.Keys()
	reqs := make([]request, len(keys))
	for i, k := range keys {
		reqs[i] = v.batchRequest(arg.Get(k))
	}
	answers := v.do(reqs)
	if isArray {
		out := make([]any, len(answers))
		for i, a := range answers {
			out[i] = v.responseObject(a)
		}
		return v.rt.NewArray(out...)
	}
	out := v.rt.NewObject()
	for i, k := range keys {
		_ = out.Set(k, v.responseObject(answers[i]))
	}
	return out
}

func (v *vu) batchRequest(val goja.Value) request {
	const what = "k6/http.batch"
	obj, ok := val.(*goja.Object)
	if !ok {
		return v.readRequest(what, http.MethodGet, val, goja.Undefined(), goja.Undefined())
	}
	if obj.ClassName() == "Array" {
		get := func(i int) goja.Value {
			if x := obj.Get(strconv.Itoa(i)); x != nil {
				return x
			}
			return goja.Undefined()
		}
		return v.readRequest(what, strings.ToUpper(get(0).String()), get(1), get(2), get(3))
	}
	for _, k := range obj.Keys() {
		if k != "method" && k != "url" && k != "body" && k != "params" {
			panic(v.notImplemented(what + " request field " + k))
		}
	}
	field := func(k string) goja.Value {
		if x := obj.Get(k); x != nil {
			return x
		}
		return goja.Undefined()
	}
	method := http.MethodGet
	if m := field("method"); !goja.IsUndefined(m) {
		method = strings.ToUpper(m.String())
	}
	return v.readRequest(what, method, field("url"), field("body"), field("params"))
}

// readRequest reads a request's URL, body and params as k6 does.
func (v *vu) readRequest(what, method string, u, body, params goja.Value) request {
	if v.stage == stageInit {
		v.throw("%s: making HTTP requests in the init context is not supported", what)
	}
	req := request{method: method, url: u.String(), headers: http.Header{}, timeout: 60 * time.Second, responseType: "text"}
	if _, err := url.ParseRequestURI(req.url); err != nil {
		v.throw("%s: invalid URL %q: %v", what, req.url, err)
	}
	switch b := body.Export().(type) {
	case nil:
	case string:
		req.body, req.hasBody = []byte(b), true
	case goja.ArrayBuffer:
		req.body, req.hasBody = b.Bytes(), true
	case []byte:
		req.body, req.hasBody = b, true
	case map[string]any: // k6 sends an object as a form
		form := url.Values{}
		for k, x := range b {
			form.Set(k, fmt.Sprint(x))
		}
		req.body, req.hasBody = []byte(form.Encode()), true
		req.headers.Set("Content-Type", "application/x-www-form-urlencoded")
	default:
		v.throw("%s: a body of type %T is not supported", what, b)
	}
	if p, ok := params.(*goja.Object); ok && !goja.IsNull(params) {
		for _, k := range p.Keys() {
			if !paramsImplemented[k] {
				panic(v.notImplemented(what + " params." + k))
			}
		}
		if h, ok := p.Get("headers").(*goja.Object); ok {
			for _, k := range h.Keys() {
				req.headers.Set(k, h.Get(k).String())
			}
		}
		req.tags = v.userTags(p.Get("tags"), what+" params.tags")
		if t := p.Get("timeout"); t != nil && !goja.IsUndefined(t) {
			b, _ := json.Marshal(t.Export())
			d, err := durationOf(b)
			if err != nil || d <= 0 {
				v.throw("%s: params.timeout: %v", what, t)
			}
			req.timeout = d
		}
		if rt := p.Get("responseType"); rt != nil && !goja.IsUndefined(rt) {
			req.responseType = rt.String()
			if req.responseType != "text" && req.responseType != "binary" && req.responseType != "none" {
				v.throw("%s: params.responseType %q is not text, binary or none", what, req.responseType)
			}
		}
	}
	if req.headers.Get("User-Agent") == "" {
		req.headers.Set("User-Agent", "k6smoke (Sekali's k6 smoke runner)")
	}
	return req
}

// do sends reqs, at most options.batch at once (and batchPerHost to one
// host: the scripts send to one), and samples k6's HTTP metrics.
func (v *vu) do(reqs []request) []response {
	limit := min(max(v.run.opts.batch, 1), max(v.run.opts.batchPerHost, 1))
	if v.run.opts.batch == 0 || v.run.opts.batchPerHost == 0 { // 0 is k6's "no limit"
		limit = max(v.run.opts.batch, v.run.opts.batchPerHost, len(reqs))
	}
	out := make([]response, len(reqs))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = v.send(req)
		}()
	}
	wg.Wait()
	for _, res := range out {
		tags := v.tags(res.req.tags)
		tags["method"], tags["url"], tags["status"] = res.req.method, res.req.url, strconv.Itoa(res.status)
		if tags["name"] == "" {
			tags["name"] = res.req.url
		}
		failed := res.status < 200 || res.status >= 400
		tags["expected_response"] = strconv.FormatBool(!failed)
		v.run.metrics.add("http_reqs", 1, tags)
		v.run.metrics.add("http_req_duration", ms(res.duration), tags)
		v.run.metrics.add("http_req_waiting", ms(res.waiting), tags)
		v.run.metrics.add("http_req_failed", bool01(failed), tags)
	}
	v.run.mu.Lock()
	v.run.requests += len(reqs)
	v.run.mu.Unlock()
	return out
}

func (v *vu) send(req request) response {
	res := response{req: req}
	ctx, cancel := context.WithTimeout(v.run.ctx, req.timeout)
	defer cancel()
	var body io.Reader
	if req.hasBody {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, req.url, body)
	if err != nil {
		res.err = err
		return res
	}
	hr.Header = req.headers.Clone()
	start := time.Now()
	resp, err := v.client.Do(hr)
	if err != nil {
		res.err, res.duration = err, time.Since(start)
		return res
	}
	res.waiting = time.Since(start)
	res.body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	res.duration = time.Since(start)
	res.status, res.statusT, res.proto, res.headers, res.url = resp.StatusCode, resp.Status, resp.Proto, resp.Header, resp.Request.URL.String()
	if err != nil {
		res.err = err
	}
	return res
}

// responseObject is k6's Response: status, body, headers, json(), error,
// the request; any other member is named as missing.
func (v *vu) responseObject(res response) *goja.Object {
	o := v.strictObject("k6/http.Response")
	errText, errCode := "", 0
	if res.err != nil {
		errText, errCode = res.err.Error(), 1000 // k6's generic error code
		if errors.Is(res.err, context.DeadlineExceeded) {
			errText, errCode = "request timeout", 1050
		}
	}
	var body goja.Value = v.rt.ToValue(string(res.body))
	switch {
	case res.req.responseType == "binary":
		body = v.rt.ToValue(v.rt.NewArrayBuffer(res.body))
	case res.req.responseType == "none", res.err != nil && res.body == nil:
		body = goja.Null()
	}
	headers := v.rt.NewObject()
	for k, vals := range res.headers {
		_ = headers.Set(k, strings.Join(vals, ", "))
	}
	reqHeaders := v.rt.NewObject()
	for k, vals := range res.req.headers {
		arr := make([]any, len(vals))
		for i, x := range vals {
			arr[i] = x
		}
		_ = reqHeaders.Set(k, v.rt.NewArray(arr...))
	}
	reqObj := v.strictObject("k6/http.Response.request")
	_ = reqObj.Set("method", res.req.method)
	_ = reqObj.Set("url", res.req.url)
	_ = reqObj.Set("headers", reqHeaders)
	_ = reqObj.Set("body", string(res.req.body))
	timings := v.strictObject("k6/http.Response.timings")
	for k, d := range map[string]time.Duration{"duration": res.duration, "waiting": res.waiting, "receiving": res.duration - res.waiting,
		"blocked": 0, "connecting": 0, "tls_handshaking": 0, "sending": 0} {
		_ = timings.Set(k, ms(d))
	}
	u := res.url
	if u == "" {
		u = res.req.url
	}
	for k, val := range map[string]any{"status": res.status, "status_text": res.statusT, "proto": res.proto, "url": u,
		"body": body, "headers": headers, "error": errText, "error_code": errCode, "request": reqObj, "timings": timings} {
		_ = o.Set(k, val)
	}
	raw := res.body
	_ = o.Set("json", func(call goja.FunctionCall) goja.Value {
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			v.throw("k6/http.Response.json: the body is not JSON: %v", err)
		}
		if sel := call.Argument(0); !goja.IsUndefined(sel) {
			got, ok := v.selectJSON(doc, sel.String())
			if !ok {
				return goja.Undefined()
			}
			doc = got
		}
		b, _ := json.Marshal(doc)
		val, err := v.parse(string(b))
		if err != nil {
			panic(err)
		}
		return val
	})
	return o
}

// selectJSON follows a dotted path (a.b.0.c), the part of gjson's
// selector syntax the runner implements; wildcards and queries are named
// as missing.
func (v *vu) selectJSON(doc any, path string) (any, bool) {
	if strings.ContainsAny(path, "*?#|@\\") {
		panic(v.notImplemented("k6/http.Response.json selector " + strconv.Quote(path)))
	}
	cur := doc
	for _, part := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[part]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
