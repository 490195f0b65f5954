package midtrans

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sekali/sekali/app/gatewaycalls"
	"github.com/sekali/sekali/app/gateways/httpjson"
)

// PageOpener opens Snap payment pages: POST {snap}/snap/v1/transactions
// with the server key as the basic-auth user, the request's Key as the
// Snap order_id, gross_amount and item prices in whole rupiah (IDR only:
// Sekali counts IDR in whole rupiah too), and the return URL as the
// finish callback (docs.midtrans.com/reference/backend-integration).
//
// A Snap order_id is single-use and Midtrans does not replay an answer:
// a second create with it is refused (400 "…order_id has already been
// taken", or "…has been paid and utilized…" once paid), never given the
// first token. So a repeat after a lost answer (a timeout, a 5xx, a
// connection that broke after Midtrans acted) is *gatewaycalls.KeySpent, and
// the caller opens the page again under a new key (gatewaycalls.Pages does:
// {order}~{attempt}, which Parse reads back as the order); the lost token
// is never paid through unless its customer had it. An order_id already
// paid is *gatewaycalls.Refused: its notification settles the order.
//
// Answers: 201 (or 200) with a token → the token and redirect_url (Snap's
// answer states no amount or currency: Page's Amount and Currency stay 0
// and "", and there is nothing to check it against — what the customer
// pays is checked when its notification comes, against the order); any
// other 4xx but 408, 409, 425 and 429 → *gatewaycalls.Refused; those, a 5xx,
// an answer without a token, no answer, or the context's end → a plain
// error: unknown whether Midtrans acted. A request that cannot be sent as
// it is (another currency than IDR, items that do not add up to the
// amount) is refused before it is sent: *gatewaycalls.Refused with Status 0.
type PageOpener struct {
	BaseURL   string // Snap's: https://app.midtrans.com, https://app.sandbox.midtrans.com, or a test server
	serverKey string
	Client    *http.Client
}

// SnapURL is Snap's host for the server key: the sandbox's for an "SB-"
// key.
func SnapURL(serverKey string) string {
	return strings.Replace(APIURL(serverKey), "://api.", "://app.", 1)
}

// NewPageOpener returns the Snap opener for the server key; Snap is
// SnapURL(serverKey) unless snapURL says otherwise (the sandbox gateway
// serves Snap at {sandbox}/sandbox/midtrans, SandboxAPIPath).
func NewPageOpener(serverKey, snapURL string) (*PageOpener, error) {
	if err := CheckServerKey(serverKey); err != nil {
		return nil, err
	}
	if snapURL == "" {
		snapURL = SnapURL(serverKey)
	}
	return &PageOpener{BaseURL: strings.TrimSuffix(snapURL, "/"), serverKey: serverKey,
		Client: httpjson.NewClient(httpjson.DefaultTimeout)}, nil
}

// Provider implements gatewaycalls.PageOpener.
func (*PageOpener) Provider() string { return Name }

// PageOrigins implements gatewaycalls.PageOpener: Snap's redirect_url is on
// Snap's own host.
func (o *PageOpener) PageOrigins() []string { return []string{gatewaycalls.Origin(o.BaseURL)} }

// snapTransaction is Snap's request.
type snapTransaction struct {
	TransactionDetails struct {
		OrderID     string `json:"order_id"`
		GrossAmount int64  `json:"gross_amount"`
	} `json:"transaction_details"`
	ItemDetails     []snapItem `json:"item_details,omitempty"`
	CustomerDetails *struct {
		Email string `json:"email"`
	} `json:"customer_details,omitempty"`
	Callbacks struct {
		Finish string `json:"finish"`
	} `json:"callbacks"`
	Expiry *snapExpiry `json:"expiry,omitempty"`
}

// snapExpiry is when the transaction expires: duration units after
// start_time ("2006-01-02 15:04:05 +0700"). Midtrans then sends an
// expire notification of a payment still pending (a virtual account
// not paid).
type snapExpiry struct {
	StartTime string `json:"start_time"`
	Unit      string `json:"unit"`
	Duration  int64  `json:"duration"`
}

// wib is Western Indonesia Time, the zone Midtrans's examples write.
var wib = time.FixedZone("WIB", 7*60*60)

type snapItem struct {
	ID       string `json:"id"`
	Price    int64  `json:"price"`
	Quantity int64  `json:"quantity"`
	Name     string `json:"name"`
}

// OpenPage implements gatewaycalls.PageOpener.
func (o *PageOpener) OpenPage(ctx context.Context, r gatewaycalls.PageRequest) (gatewaycalls.Page, error) {
	body, err := snapBody(r)
	if err != nil {
		return gatewaycalls.Page{}, err
	}
	code, answer, err := httpjson.Post(ctx, o.Client, o.BaseURL+"/snap/v1/transactions", o.serverKey, body)
	if err != nil {
		return gatewaycalls.Page{}, fmt.Errorf("midtrans snap: %w", err)
	}
	var a struct {
		Token         string   `json:"token"`
		RedirectURL   string   `json:"redirect_url"`
		ErrorMessages []string `json:"error_messages"`
	}
	decodeErr := json.Unmarshal(answer, &a)
	switch {
	case (code == http.StatusCreated || code == http.StatusOK) && decodeErr == nil && a.Token != "" && a.RedirectURL != "":
		return gatewaycalls.Page{ObjectID: a.Token, RedirectURL: a.RedirectURL}, nil
	case gatewaycalls.RefusedStatus(code):
		msg := strings.Join(a.ErrorMessages, "; ")
		if msg == "" {
			msg = http.StatusText(code)
		}
		if strings.Contains(msg, "has already been taken") {
			return gatewaycalls.Page{}, &gatewaycalls.KeySpent{Message: msg}
		}
		return gatewaycalls.Page{}, &gatewaycalls.Refused{Status: code, Message: msg}
	}
	return gatewaycalls.Page{}, fmt.Errorf("midtrans snap: HTTP %d %.200s", code, answer)
}

// snapBody is the Snap transaction that r asks for. A request without
// items is sent without item_details.
func snapBody(r gatewaycalls.PageRequest) ([]byte, error) {
	if strings.ToUpper(r.Currency) != "IDR" {
		return nil, &gatewaycalls.Refused{Message: fmt.Sprintf("midtrans snap: Snap takes IDR, not %q", r.Currency)}
	}
	if r.Key == "" || r.Amount < 1 {
		return nil, &gatewaycalls.Refused{Message: "midtrans snap: no order_id (key) or no amount"}
	}
	var t snapTransaction
	t.TransactionDetails.OrderID, t.TransactionDetails.GrossAmount = r.Key, r.Amount
	t.Callbacks.Finish = r.ReturnURL
	if within := r.PayWithin(time.Minute); within > 0 { // whole minutes, rounded up: never before the order's end
		t.Expiry = &snapExpiry{StartTime: r.AskedAt.In(wib).Format("2006-01-02 15:04:05 -0700"), Unit: "minute",
			Duration: int64((within + time.Minute - 1) / time.Minute)}
	}
	if r.CustomerEmail != "" {
		t.CustomerDetails = &struct {
			Email string `json:"email"`
		}{r.CustomerEmail}
	}
	if err := r.CheckItems("midtrans snap"); err != nil { // Midtrans refuses it: gross_amount must be the items' sum
		return nil, err
	}
	for _, it := range r.Items {
		t.ItemDetails = append(t.ItemDetails, snapItem{ID: it.SKU, Price: it.UnitPrice, Quantity: it.Qty, Name: it.Name})
	}
	return json.Marshal(t)
}
