package models_test

import (
	"encoding/json"
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/sekali/sekali/models"
)

func keepNone(string) bool { return false }

// secretParts are the parts of addr a viewer must not see: every run of
// two or more letters or digits but the top-level domain the mask keeps.
func secretParts(addr string) []string {
	at := strings.LastIndex(addr, "@")
	tld := addr[strings.LastIndex(addr, ".")+1:]
	var out []string
	for _, p := range regexp.MustCompile(`[\p{L}\p{N}]{2,}`).FindAllString(addr, -1) {
		if p == tld && strings.HasSuffix(addr, "."+tld) && at < strings.LastIndex(addr, ".") {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Each address the shop was shown to accept is either refused by the
// rule, with the rule in the message, or accepted; either way no secret
// part of it is left in what a viewer sees: its masked form, or any text
// that holds it as a page, a JSON answer, a JSON body kept inside a JSON
// answer, or a URL's query writes it. An accepted address is found
// without being named; any address is found when named as known.
func TestCustomerEmailRuleAndMask(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr   string
		accept bool
		masked string
	}{
		{"secret.user@example.com", true, "s***@e***.com"},
		{"secret+tag@shop.example.co.id", true, "s***@s***.id"},
		{"Secret_User-1@Example-Shop.COM", true, "S***@E***.COM"},
		{"secret.user@xn--exmple-cua.com", true, "s***@x***.com"},
		{"secret.user@exämple.com", false, "s***@e***.com"},
		{"secret.ip@[127.0.0.1]", false, "s***@[***"},
		{"secret{curly}@example.com", false, "s***@e***.com"},
		{"secret.tld@localhost", false, "s***@l***"},
		{"secret!hash#tag@example.com", false, "s***@e***.com"},
		{"secret/slash@example.com", false, "s***@e***.com"},
		{"josé.secret@example.com", false, "j***@e***.com"},
		{"secret&amp@example.com", false, "s***@e***.com"},
		{"secret'quote@example.com", false, "s***@e***.com"},
		{`"secret quoted"@example.com`, false, `"***@e***.com`},
		{"secret.ip@127.0.0.1", false, "s***@1***"},
		{".secret@example.com", false, ".***@e***.com"},
		{"secret..dots@example.com", false, "s***@e***.com"},
		{"secret@-example.com", false, "s***@-***.com"},
	} {
		err := models.CheckCustomerEmail(tc.addr)
		if (err == nil) != tc.accept {
			t.Errorf("CheckCustomerEmail(%q) = %v, want accepted %v", tc.addr, err, tc.accept)
		}
		if err != nil && (models.ErrorCode(err) != models.EInvalid || !strings.Contains(err.Error(), "name@example.com")) {
			t.Errorf("CheckCustomerEmail(%q) = %v: not an invalid_request naming the rule", tc.addr, err)
		}
		if got := models.MaskEmail(tc.addr); got != tc.masked {
			t.Errorf("MaskEmail(%q) = %q, want %q", tc.addr, got, tc.masked)
		}
		for _, form := range textsHolding(tc.addr) {
			var known []string
			if !tc.accept {
				known = []string{tc.addr}
			}
			got := models.MaskEmailsIn(form, known, keepNone)
			for _, secret := range secretParts(tc.addr) {
				if strings.Contains(strings.ToLower(got), strings.ToLower(secret)) {
					t.Errorf("%q masked as %q: %q is left", form, got, secret)
				}
			}
		}
	}
}

// textsHolding are ways an answer writes addr: in a page, in a JSON
// answer, in a kept JSON body inside a JSON answer and inside a page,
// and in a link's query.
func textsHolding(addr string) []string {
	body, _ := json.Marshal(map[string]string{"payer_email": addr})
	answer, _ := json.Marshal(map[string]string{"body": string(body), "email": addr})
	return []string{
		"<td>" + html.EscapeString(addr) + "</td>",
		string(answer),
		"<pre>" + html.EscapeString(string(body)) + "</pre>",
		`<a href="/admin/orders?email=` + url.QueryEscape(addr) + `">`,
	}
}

// The admins' own addresses are kept; another address beside one is not.
func TestMaskEmailsInKeeps(t *testing.T) {
	t.Parallel()
	keep := func(s string) bool { return s == "owner@example.com" }
	got := models.MaskEmailsIn("by Owner@Example.com for buyer@example.com", nil, keep)
	if got != "by Owner@Example.com for b***@e***.com" {
		t.Errorf("got %q", got)
	}
}

// Any accepted address, written in any of the answer's ways between
// characters that cannot be part of it, comes out as exactly its masked
// form written the same way.
func FuzzMaskEmailsIn(f *testing.F) {
	for _, s := range []string{"a@b.co", "secret.user@example.com", "x+y_z-1@a-b.c-d.museum", "A.B@C.D.EF"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		if models.CheckCustomerEmail(addr) != nil {
			return
		}
		m := models.MaskEmail(addr)
		for _, tc := range [][2]string{
			{`"` + addr + `"`, `"` + m + `"`},
			{"<td>" + addr + "</td>", "<td>" + m + "</td>"},
			{"?email=" + url.QueryEscape(addr) + "&x", "?email=" + strings.Replace(m, "@", "%40", 1) + "&x"},
		} {
			if got := models.MaskEmailsIn(tc[0], nil, keepNone); got != tc[1] {
				t.Errorf("MaskEmailsIn(%q) = %q, want %q", tc[0], got, tc[1])
			}
		}
	})
}
