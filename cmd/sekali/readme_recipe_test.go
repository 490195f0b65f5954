package main

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/gateways"
)

// recipeMarker is the comment above README's block of commands that pay
// through an emulated gateway.
const recipeMarker = "<!-- cmd/sekali/readme_recipe_test.go runs each line of this block as written -->"

// recipeLines are the commands of README's emulated-gateway block, each
// continued line joined.
func recipeLines(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), recipeMarker+"\n```sh\n")
	if !ok {
		t.Fatalf("README.md has no ```sh block under %q", recipeMarker)
	}
	block, _, _ = strings.Cut(block, "```")
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

var assignment = regexp.MustCompile(`^([A-Z_]+)=(\S*)$`)

// TestReadmeGatewayRecipe runs each command of README's recipe for paying
// through an emulated gateway — its variables, with `make run`'s own
// (SANDBOX_GATEWAY=on), on a free port instead of 8080 — and pays an
// order as a customer would: Pay, the gateway's emulated page, its Pay
// button. The payment is that gateway's, not the sandbox's, so that its
// refunds go to that gateway too; every gateway has its line.
func TestReadmeGatewayRecipe(t *testing.T) {
	t.Parallel()
	lines := recipeLines(t)
	covered := map[string]bool{}
	for _, line := range lines {
		fields := strings.Fields(line)
		if len(fields) < 2 || strings.Join(fields[len(fields)-2:], " ") != "make run" {
			t.Fatalf("README recipe line %q: want VAR=value … make run", line)
		}
		env := map[string]string{}
		for _, f := range fields[:len(fields)-2] {
			m := assignment.FindStringSubmatch(f)
			if m == nil {
				t.Fatalf("README recipe line %q: %q is not VAR=value", line, f)
			}
			env[m[1]] = m[2]
		}
		gw := env["PAYMENT_GATEWAY"]
		covered[gw] = true
		t.Run(gw, func(t *testing.T) {
			t.Parallel()
			payThroughRecipe(t, gw, env)
		})
	}
	for _, name := range gateways.Names() {
		if name != "sandbox" && !covered[name] {
			t.Errorf("README's recipe has no line for %s", name)
		}
	}
}

// payThroughRecipe serves with env as README sets it and pays one order
// on gw's emulated page.
func payThroughRecipe(t *testing.T, gw string, env map[string]string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the app listens there next
	for k, v := range env {
		env[k] = strings.ReplaceAll(v, "localhost:8080", addr)
	}
	env["HTTP_ADDR"], env["SANDBOX_GATEWAY"] = addr, "on" // as make run serves, on a port of the test's
	a := startApp(t, env)
	if _, err := catalog.Seed(context.Background(), a.DB); err != nil {
		t.Fatal(err)
	}
	id := a.createOrder(t, map[string]int{"DEMO-MUG": 1})
	r := a.do(t, "POST", a.orderAction(id, "payment"), nil, nil)
	if r.Status != http.StatusOK || r.str("provider") != gw {
		t.Fatalf("Pay: %d %s, want %s's page", r.Status, r.Body, gw)
	}
	res, err := http.Get(r.str("redirect_url"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the page %s: %d, %v", r.str("redirect_url"), res.StatusCode, err)
	}
	if warning := doc.Find(".gateway-card .flash.warn").Text(); warning != "" {
		t.Errorf("the page warns: %q", warning)
	}
	pay := doc.Find(`form:has(input[name=outcome][value=paid]):has(input[name=return][value=order])`)
	form := url.Values{}
	pay.Find("input").Each(func(_ int, in *goquery.Selection) {
		form.Set(in.AttrOr("name", ""), in.AttrOr("value", ""))
	})
	if form.Get("provider") != gw {
		t.Errorf("the page's Pay pays in %q's format, want %q's", form.Get("provider"), gw)
	}
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	action, _ := url.Parse(r.str("redirect_url"))
	action.Path, action.RawQuery = pay.AttrOr("action", ""), ""
	res, err = noRedirects.PostForm(action.String(), form)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("pressing Pay: %d", res.StatusCode)
	}
	a.eventually(t, 1, "SELECT count(*) FROM payments WHERE order_id = ? AND status = 'succeeded'", id)
	if n := a.count(t, "SELECT count(*) FROM payments WHERE order_id = ? AND provider = ?", id, gw); n != 1 {
		t.Errorf("the order's %s payments: %d, want its one payment recorded as %s's", gw, n, gw)
	}
}
