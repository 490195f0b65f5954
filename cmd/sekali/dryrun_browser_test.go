package main

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/models"
)

// TestBrowserDryRunFitsAt1280: the dry run of a payment rejected for its
// amount, on a 1280 px screen, keeps every figure (the order's id above
// all) inside its card, and offers "Apply again".
func TestBrowserDryRunFitsAt1280(t *testing.T) {
	if testing.Short() {
		t.Skip("drives Chromium: make test runs it")
	}
	t.Parallel()
	a := startApp(t, nil)
	b := loggedInBrowser(t, a)
	sku := a.newProduct(t, 90000, 5)
	id := a.createOrder(t, map[string]int{sku: 1})
	if r := a.callback(t, "evt_dry_"+id, testenv.SandboxBody(id, "tx-dry", models.EventPaid, 80000)); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("the mismatched payment: %d %s", r.Status, r.Body)
	}
	a.eventually(t, 1, "SELECT count(*) FROM callback_deliveries WHERE outcome = 'rejected' AND body IS NOT NULL")
	delivery := a.count(t, "SELECT id FROM callback_deliveries WHERE outcome = 'rejected'")
	b.do("a 1280 px window", chromedp.EmulateViewport(1280, 800))
	if st := b.open(fmt.Sprintf("/admin/deliveries/%d/dry-run", delivery)); st != http.StatusOK {
		t.Fatalf("the dry run: %d", st)
	}
	out := browserEval[[]string](b, "the figures that run out of their cards", `[...document.querySelectorAll(".stat")].flatMap(card => {
		const edge = card.getBoundingClientRect().right;
		return [...card.querySelectorAll("div")].filter(e => e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right > edge + 1)
			.map(e => e.textContent.trim());
	})`)
	if len(out) != 0 {
		t.Errorf("at 1280 px these run out of their cards: %q", out)
	}
	if n := browserEval[int](b, "the apply again form", `document.querySelectorAll('form[action$="/apply"] input[name=reason]').length`); n != 1 {
		t.Errorf("the dry run offers %d apply again forms, want 1", n)
	}
}
