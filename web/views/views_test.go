package views_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"

	"github.com/sekali/sekali/web/views"
)

func render(t *testing.T, c templ.Component) *goquery.Document {
	t.Helper()
	var b strings.Builder
	if err := c.Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// The callbacks list: one row per callback, linked to its page and its
// order; a callback with conflicts is marked; the region refreshes itself
// from the page's own URL; the pager links to the next page.
func TestCallbacksPage(t *testing.T) {
	t.Parallel()
	now := time.Now()
	v := views.List[views.CallbackRow]{
		Now: now, Self: "/admin/callbacks?provider=sandbox", Next: "/admin/callbacks?before=7&provider=sandbox",
		Rows: []views.CallbackRow{
			{ID: 9, Provider: "sandbox", Key: "evt_9", OrderID: "ORD-9", Event: "paid", Amount: 150000, Currency: "IDR", Result: "processed", Attempts: 3, Conflicts: 1, FirstReceived: now},
			{ID: 8, Provider: "sandbox", Key: "evt_8", OrderID: "ORD-8", Event: "failed", Currency: "IDR", Result: "stale", Attempts: 1, FirstReceived: now},
		},
	}
	doc := render(t, views.CallbacksPage(v, views.CallbackFilter{Provider: "sandbox"}, []string{"sandbox"}, []string{"processed", "stale"}))
	rows := doc.Find("#list tbody tr")
	if rows.Length() != 2 {
		t.Fatalf("%d rows, want 2", rows.Length())
	}
	first := rows.First()
	if !first.HasClass("marked") || rows.Last().HasClass("marked") {
		t.Error("only the callback with a conflict is marked")
	}
	if href, _ := first.Find("a[href^='/admin/callbacks/']").Attr("href"); href != "/admin/callbacks/9" {
		t.Errorf("callback link %q", href)
	}
	if href, _ := first.Find("a[href^='/admin/orders/']").Attr("href"); href != "/admin/orders/ORD-9" {
		t.Errorf("order link %q", href)
	}
	if got := first.Find(".badge").Text(); got != "processed" || !first.Find(".badge").HasClass("ok") {
		t.Errorf("result badge %q", got)
	}
	if !strings.Contains(first.Text(), "Rp 150.000") {
		t.Errorf("amount not formatted: %q", first.Text())
	}
	live := doc.Find("#list")
	if get, _ := live.Attr("hx-get"); get != v.Self {
		t.Errorf("the list refreshes from %q, want %q", get, v.Self)
	}
	if trig, _ := live.Attr("hx-trigger"); trig != "every 5s" {
		t.Errorf("hx-trigger %q", trig)
	}
	if next, _ := doc.Find("a[rel=next]").Attr("href"); next != string(v.Next) {
		t.Errorf("next page %q", next)
	}
	if sel := doc.Find("select[name=provider] option[selected]").Text(); sel != "sandbox" {
		t.Errorf("the provider filter shows %q selected", sel)
	}
	// The filter form is a plain GET form: it works without JavaScript.
	form := doc.Find("form.filters")
	if m, _ := form.Attr("method"); m != "get" {
		t.Errorf("filter form method %q", m)
	}
}

// The help page links to the operations guide, where the alerts'
// runbook is.
func TestHelpLinksTheOperationsGuide(t *testing.T) {
	t.Parallel()
	doc := render(t, views.HelpPage())
	if doc.Find("a[href='"+views.OperationsGuide+"']").Length() != 1 {
		t.Errorf("the help page has no link to %s", views.OperationsGuide)
	}
}

// The layout marks the current section, shows who is logged in, offers a
// log-out POST and loads only hashed assets from /static.
func TestLayout(t *testing.T) {
	t.Parallel()
	doc := render(t, views.Layout(views.Meta{Title: "Jobs", Section: "jobs", Admin: "ops@example.com",
		Flash: &views.Flash{Tone: "ok", Text: "Done."}}, views.HelpPage()))
	if cur := doc.Find("nav a[aria-current=page]").Text(); cur != "Jobs" {
		t.Errorf("current section %q", cur)
	}
	if doc.Find(".who").Text() != "ops@example.com" || doc.Find("form[action='/admin/logout'][method=post]").Length() != 1 {
		t.Error("no admin or no log-out form")
	}
	if doc.Find("#flash .flash.ok").Text() != "Done." {
		t.Error("flash not shown")
	}
	doc.Find("script[src], link[rel=stylesheet]").Each(func(_ int, s *goquery.Selection) {
		src := s.AttrOr("src", s.AttrOr("href", ""))
		if !strings.HasPrefix(src, "/static/") || strings.Count(src, ".") < 2 {
			t.Errorf("asset %q is not a hashed /static name", src)
		}
	})
	// The log-in page has no navigation.
	if render(t, views.Layout(views.Meta{Title: "Log in"}, views.LoginPage(views.Login{}))).Find("nav").Length() != 0 {
		t.Error("the log-in page shows the navigation")
	}
}

// The chart stacks each minute's series bottom to top, scaled to a round
// maximum, within the plot.
func TestChart(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	counts := map[time.Time]map[string]int64{
		start:                       {"processed": 30, "duplicate": 50},
		start.Add(59 * time.Minute): {"conflict": 2},
	}
	c := views.NewChart(start, 60, counts)
	if len(c.Bars) != 60 || c.YMax != 80 || c.Empty {
		t.Fatalf("bars %d, y max %d, empty %v; want 60 bars up to 80", len(c.Bars), c.YMax, c.Empty)
	}
	b := c.Bars[0]
	if len(b.Segments) != 2 || b.Segments[0].Series != "processed" || b.Segments[1].Series != "duplicate" {
		t.Fatalf("first bar %+v", b.Segments)
	}
	bottom := float64(c.Height - 22)
	if got := b.Segments[0].Y + b.Segments[0].H; got != bottom {
		t.Errorf("processed starts at %v, want the axis %v", got, bottom)
	}
	if got := b.Segments[1].Y + b.Segments[1].H; got != b.Segments[0].Y {
		t.Errorf("duplicate stacks at %v, want on top of processed (%v)", got, b.Segments[0].Y)
	}
	if top := b.Segments[1].Y; top < 0 || top > 10 {
		t.Errorf("the tallest bar's top is at %v, want the top of the plot", top)
	}
	if len(c.Bars[30].Segments) != 0 || c.Bars[59].Total != 2 {
		t.Errorf("an empty minute or the last minute is wrong: %+v %+v", c.Bars[30], c.Bars[59])
	}
	if !views.NewChart(start, 60, nil).Empty {
		t.Error("a chart without deliveries is not empty")
	}
}

func TestFormats(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ got, want string }{
		{views.Money(150000, "IDR"), "Rp 150.000"},
		{views.Money(1234567, "USD"), "12,345.67 USD"},
		{views.Money(5, "EUR"), "0.05 EUR"},
		{views.Money(2500, "JPY"), "2,500 JPY"},
		{views.Int(int64(1234567)), "1,234,567"},
		{views.Percent(1, 3), "33.3%"},
		{views.Percent(1, 0), "—"},
		{views.Duration(90 * time.Second), "1m"},
		{views.Duration(125 * time.Minute), "2h5m"},
		{views.Ago(time.Unix(100, 0), time.Unix(40, 0)), "1m ago"},
		{views.Ago(time.Unix(100, 0), time.Unix(220, 0)), "in 2m"},
		{views.Soon(time.Unix(100, 0), time.Unix(400, 0)), "in 5m"},
		{views.Soon(time.Unix(100, 0), time.Unix(100, 0)), "due now"},
		{views.Soon(time.Unix(100, 0), time.Unix(40, 0)), "due now"},
		{views.GatewayRequestRow{}.Asked(), "not asked yet"},
		{views.GatewayRequestRow{Asks: 1}.Asked(), "asked once"},
		{views.GatewayRequestRow{Asks: 3}.Asked(), "asked 3 times"},
		{views.Query("/admin/jobs", "status", "", "key", "a b"), "/admin/jobs?key=a+b"},
		{views.RefURL("order:ORD-1"), "/admin/orders/ORD-1"},
		{views.RefURL("job:invoice:generate:ORD-1"), "/admin/jobs/invoice:generate:ORD-1"},
		{views.RefURL("nothing"), ""},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
