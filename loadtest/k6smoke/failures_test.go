package k6smoke

import (
	"context"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/testenv"
)

// runLogged runs a script against a server and keeps its log.
func runLogged(t *testing.T, script string, env map[string]string) (*Result, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Budget(t))
	defer cancel()
	var log lockedBuffer
	res, err := Run(ctx, Config{Script: script, Env: env, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the run's log:\n%s", log.String())
	return res, log.String()
}

// TestFailsOnAFailedCheck: a script whose callbacks go to a wrong path
// (testdata/wrong-path.js) gets 404s, and the runner fails on its check —
// and on the threshold that counts processed callbacks — against a real
// server; the audit, which nothing changed, stays green.
func TestFailsOnAFailedCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/sekali and runs k6 scripts against it: make test runs it")
	}
	t.Parallel()
	tg := startServer(t)
	res, log := runLogged(t, "testdata/wrong-path.js", tg.env("sandbox", nil))
	wantFailure(t, res,
		"check failed 2 of 2 times: callback: expected status and result",
		"threshold crossed: result_processed: count==2 (count=0)",
		"threshold crossed: checks: rate==1")
	if !strings.Contains(log, "unexpected answer 404") {
		t.Errorf("the log shows no 404 answer")
	}
	auditOK(t, tg)
}

// TestFailsOnAWrongSignature: duplicate-storm signed with a secret the
// server does not have — the Standard Webhooks key of the sandbox,
// Stripe's endpoint secret — is refused 401, and the runner fails on the
// checks and thresholds of the script, for every format signed in a
// header. A wrong Midtrans key or Xendit token stops set-up instead: the
// sandbox gateway, standing in for the API that confirms their payments,
// refuses it before any notification is sent. (Their signatures are
// compared with sekali sign's in TestSigningMatchesSekaliSign.)
func TestFailsOnAWrongSignature(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/sekali and runs k6 scripts against it: make test runs it")
	}
	t.Parallel()
	tg := startServer(t)
	env := tg.env("xendit", smokeEnv)
	env["XENDIT_CALLBACK_TOKEN"] = "xnd-callback-token-that-is-wrong"
	res, _ := runLogged(t, "../k6/duplicate-storm.js", env)
	wantFailure(t, res, "setup: ", "telling the sandbox gateway of /sandbox/xendit/v2/invoices/", "HTTP 401")
	for provider, wrong := range map[string]map[string]string{
		"sandbox": {"SANDBOX_WEBHOOK_SECRET": "whsec_d3Jvbmcgc2VjcmV0IG9mIHRoZSB0ZXN0"},
		"stripe":  {"STRIPE_WEBHOOK_SECRET": "whsec_wrong_0123456789abcdef"},
	} {
		env := tg.env(provider, smokeEnv)
		for k, v := range wrong {
			env[k] = v
		}
		res, log := runLogged(t, "../k6/duplicate-storm.js", env)
		wantFailure(t, res,
			"check failed 9 of 9 times: callback: expected status and result",
			"threshold crossed: result_processed: count==3 (count=0)",
			"check failed 3 of 3 times: order paid once (paid, one succeeded payment)")
		if !strings.Contains(log, "unexpected answer 401") {
			t.Errorf("%s: the log shows no 401 answer", provider)
		}
	}
	auditOK(t, tg)
}
