package k6smoke

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sekali/sekali/app/testenv"
)

// writeScript writes a k6 script into a directory of its own.
func writeScript(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.js")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// echo is a server that answers every request with JSON about it, and
// counts them.
func echo(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Method", r.Method)
		if r.URL.Path == "/missing" {
			w.WriteHeader(http.StatusNotFound)
		}
		json.NewEncoder(w).Encode(map[string]any{"path": r.URL.Path, "auth": r.Header.Get("Authorization"),
			"nested": map[string]any{"list": []int{7, 8}}})
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func runSource(t *testing.T, src string, env map[string]string, dir string) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Budget(t))
	defer cancel()
	res, err := Run(ctx, Config{Script: writeScript(t, src), Env: env, SummaryDir: dir, Log: testWriter{t, ""}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestLifeCycle: a script that uses every part of the API the runner
// implements passes, and each part did what k6 does: setup's data reaches
// each VU and teardown as JSON, the executors run their iterations
// (shared, per VU, and a constant arrival rate cut to MaxIterations), each
// iteration number is handed out once, http.batch returns answers in the
// order asked, thresholds on submetrics are judged, and handleSummary's
// files land in SummaryDir.
func TestLifeCycle(t *testing.T) {
	t.Parallel()
	srv, requests := echo(t)
	dir := t.TempDir()
	res := runSource(t, `
import { check, group, sleep, fail } from 'k6';
import http from 'k6/http';
import exec from 'k6/execution';
import { Counter, Rate, Trend, Gauge } from 'k6/metrics';
import { b64encode, b64decode } from 'k6/encoding';
import { hmac, sha256, sha512, md5 } from 'k6/crypto';

const seen = new Counter('iterations_seen');
const good = new Rate('good');
const sizes = new Trend('sizes');
const last = new Gauge('last');
const iterations = {};

export const options = {
  batch: 3, batchPerHost: 3,
  scenarios: {
    shared: { executor: 'shared-iterations', vus: 3, iterations: 7, exec: 'shared' },
    each: { executor: 'per-vu-iterations', vus: 2, iterations: 2, exec: 'each' },
    rate: { executor: 'constant-arrival-rate', rate: 100, timeUnit: '1s', duration: '10s', preAllocatedVUs: 2, maxVUs: 5, exec: 'each' },
  },
  thresholds: {
    iterations_seen: ['count==7'],
    'http_reqs{endpoint:batch}': ['count==21'],
    good: ['rate==1'],
    checks: [{ threshold: 'rate==1', abortOnFail: false }],
    sizes: ['max<1000', 'p(95)>=0'],
  },
};

export function setup() {
  const res = http.get(__ENV.BASE + '/setup', { headers: { Authorization: 'Bearer x' } });
  check(res, { 'setup answered': (r) => r.status === 200 && r.json('auth') === 'Bearer x' });
  return { base: __ENV.BASE, token: 'from-setup' };
}

export function shared(data) {
  if (data.token !== 'from-setup') fail('no data from setup');
  const n = exec.scenario.iterationInTest;
  if (iterations[n]) fail('iteration ' + n + ' twice');
  iterations[n] = true;
  seen.add(1, { scenario_tag: exec.scenario.name });
  const answers = http.batch([
    ['GET', data.base + '/a', null, { tags: { endpoint: 'batch' } }],
    { method: 'POST', url: data.base + '/b', body: 'x', params: { tags: { endpoint: 'batch' } } },
    { method: 'PUT', url: data.base + '/c', body: 'y', params: { tags: { endpoint: 'batch' }, timeout: '5s' } },
  ]);
  group('answers', () => {
    check(answers, {
      'in order': (a) => a.map((r) => r.json('path')).join() === '/a,/b,/c',
      'methods': (a) => a.map((r) => r.headers['X-Method']).join() === 'GET,POST,PUT',
      'json path': (a) => a[0].json('nested.list.1') === 8 && a[0].json().nested.list.length === 2,
      'request headers': (a) => Array.isArray(a[1].request.headers['User-Agent']),
    });
  });
  good.add(true);
  sizes.add(answers[0].body.length);
  last.add(n);
  sleep(1);
}

export function each() {
  const key = b64decode(b64encode('key'), 'std');
  check(null, {
    'vu and iteration': () => exec.vu.idInTest > 0 && exec.vu.iterationInScenario >= 0,
    'encoding': () => b64decode(b64encode('héllo', 'rawurl'), 'rawurl', 's') === 'héllo',
    'hmac': () => hmac('sha256', key, 'data', 'hex') === hmac('sha256', 'key', 'data', 'hex'),
    'hashes': () => sha256('abc', 'hex').indexOf('ba7816bf') === 0 && sha512('', 'base64').length === 88 && md5('', 'hex') === 'd41d8cd98f00b204e9800998ecf8427e',
  });
  const res = http.get(__ENV.BASE + '/missing');
  check(res, { '404 is an answer, not an error': (r) => r.status === 404 && r.error === '' });
}

export function teardown(data) {
  check(data, { 'teardown gets setup data': (d) => d.token === 'from-setup' });
}

export function handleSummary(data) {
  return {
    stdout: 'iterations_seen=' + data.metrics.iterations_seen.values.count + ' checks ok=' + data.metrics.checks.thresholds['rate==1'].ok,
    'out/summary.json': JSON.stringify(data),
  };
}
`, map[string]string{"BASE": srv.URL}, dir)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	// 7 shared + 2×2 per VU + the arrival rate's 1000 cut to 24.
	if res.Iterations != 7+4+24 {
		t.Errorf("%d iterations, want 35", res.Iterations)
	}
	if want := int64(1 + 7*3 + 4 + 24); requests.Load() != want || res.Requests != int(want) {
		t.Errorf("%d requests served, %d counted, want %d", requests.Load(), res.Requests, want)
	}
	if c := res.Checks["in order"]; c != [2]int{7, 0} {
		t.Errorf("check 'in order': %v passes/fails, want 7 passes", c)
	}
	if res.Summary != "iterations_seen=7 checks ok=true" {
		t.Errorf("handleSummary's stdout: %q", res.Summary)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out", "summary.json"))
	if err != nil || !json.Valid(b) {
		t.Errorf("handleSummary's file: %v", err)
	}
}

// TestFailures: each way a k6 run fails fails the runner, with a
// failure that says which — an exception in an iteration, in setup, a
// failed check, a crossed threshold, exec.test.fail and abort (after
// which handleSummary still runs), a metric
// declared or a request made where k6 refuses them, a threshold on a
// metric that does not exist, handleSummary writing invalid JSON.
func TestFailures(t *testing.T) {
	t.Parallel()
	srv, _ := echo(t)
	for name, tc := range map[string]struct{ src, want string }{
		"exception": {`export default function () { throw new Error('boom'); }`,
			"iteration 0: Error: boom"},
		"setup throws": {`export function setup() { throw new Error('cannot set up'); } export default function () {}`,
			"setup: Error: cannot set up"},
		"check": {`import { check } from 'k6'; export default function () { check(1, { 'is two': (x) => x === 2 }); }`,
			"check failed 1 of 1 times: is two"},
		"threshold": {`import { Counter } from 'k6/metrics'; const c = new Counter('c');
export const options = { thresholds: { c: ['count==2'] } };
export default function () { c.add(1); }`,
			"threshold crossed: c: count==2 (count=1)"},
		"exec.test.fail": {`import exec from 'k6/execution'; export default function () { exec.test.fail('audit red'); }`,
			"exec.test.fail: audit red"},
		"exec.test.abort": {`import exec from 'k6/execution';
export const options = { iterations: 50 };
export default function () { exec.test.abort('stop now'); }
export function handleSummary() { return { 'after-abort.json': 'handleSummary still runs' }; }`,
			"exec.test.abort: stop now\nafter-abort.json is not valid JSON"},
		"metric outside init": {`import { Counter } from 'k6/metrics'; export default function () { new Counter('late'); }`,
			"metrics must be declared in the init context"},
		"request in init": {`import http from 'k6/http'; http.get(__ENV.BASE); export default function () {}`,
			"making HTTP requests in the init context is not supported"},
		"scenario info in setup": {`import exec from 'k6/execution'; export function setup() { return exec.scenario.iterationInTest; } export default function () {}`,
			"getting scenario information outside of the VU code is not supported"},
		"threshold on no metric": {`export const options = { thresholds: { no_such_metric: ['count==1'] } }; export default function () {}`,
			`no metric "no_such_metric" is defined`},
		"missing exec": {`export const options = { scenarios: { s: { executor: 'shared-iterations', exec: 'nope' } } }; export default function () {}`,
			`the script exports no function "nope"`},
		"summary not JSON": {`export default function () {} export function handleSummary() { return { 'x.json': '{' }; }`,
			"x.json is not valid JSON"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := runSource(t, tc.src, map[string]string{"BASE": srv.URL}, "")
			wantFailure(t, res, strings.Split(tc.want, "\n")...)
		})
	}
}

// TestUnknownAPIIsNamed: a script that reaches for a part of k6 the
// runner does not implement fails with that part's name — a module, a
// named import, a function, a member of a response, a params key, an
// option, an executor — rather than with undefined somewhere later.
func TestUnknownAPIIsNamed(t *testing.T) {
	t.Parallel()
	srv, _ := echo(t)
	for name, tc := range map[string]struct{ src, want string }{
		"module": {`import ws from 'k6/ws'; export default function () { ws.connect(); }`,
			"k6 API k6/ws is not implemented"},
		"named import": {`import { randomBytes } from 'k6/crypto'; export default function () { randomBytes(8); }`,
			"k6 API k6/crypto.randomBytes is not implemented"},
		"default import member": {`import http from 'k6/http'; export default function () { http.file('x'); }`,
			"k6 API k6/http.file is not implemented"},
		"response member": {`import http from 'k6/http'; export default function () { http.get(__ENV.BASE).cookies; }`,
			"k6 API k6/http.Response.cookies is not implemented"},
		"params key": {`import http from 'k6/http'; export default function () { http.get(__ENV.BASE, { cookies: {} }); }`,
			"k6 API k6/http.get params.cookies is not implemented"},
		"execution member": {`import exec from 'k6/execution'; export default function () { exec.instance.vusActive; }`,
			"k6 API k6/execution.instance is not implemented"},
		"option": {`export const options = { stages: [{ duration: '1s', target: 1 }] }; export default function () {}`,
			"k6 API options.stages is not implemented"},
		"executor": {`export const options = { scenarios: { s: { executor: 'ramping-vus', stages: [] } } }; export default function () {}`,
			`k6 API executor "ramping-vus" is not implemented`},
		"hash": {`import { hmac } from 'k6/crypto'; export default function () { hmac('sha3', 'k', 'd', 'hex'); }`,
			"k6 API k6/crypto.hmac algorithm sha3 is not implemented"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := runSource(t, tc.src, map[string]string{"BASE": srv.URL}, "")
			wantFailure(t, res, tc.want)
			if !strings.Contains(strings.Join(res.Failures, "\n"), "loadtest/k6smoke") {
				t.Errorf("the failure does not say where to add it: %v", res.Failures)
			}
		})
	}
}

// wantFailure fails t unless res failed with every one of wants among its
// failures.
func wantFailure(t *testing.T, res *Result, wants ...string) {
	t.Helper()
	if res.Passed() {
		t.Fatal("the run passed; want it to fail")
	}
	all := strings.Join(res.Failures, "\n")
	for _, w := range wants {
		if !strings.Contains(all, w) {
			t.Errorf("the failures do not say %q:\n%s", w, all)
		}
	}
}

// lockedBuffer is a run's log kept for the test to read (VUs write it at
// once).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// testWriter sends output to the test log, a line at a time.
type testWriter struct {
	t      *testing.T
	prefix string
}

func (w testWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log(w.prefix + line)
	}
	return len(p), nil
}
