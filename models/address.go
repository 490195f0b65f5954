package models

import (
	"encoding/json"
	"html"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The customer's email address, by rule. The shop accepts only an
// address of one plain form (CheckCustomerEmail), and a viewer's console
// shows every address as a fixed masked form (MaskEmail) of which the
// only parts left are the first character of each side and the top-level
// domain. The form is chosen so that an address reads the same in HTML,
// in JSON and in a URL's query (but for the @ and + written %40 and
// %2B): a mask laid over any of them finds every accepted address
// (MaskEmailsIn) without guessing at escapes.

// CustomerEmailRule is the accepted form, in words, as the 422 says it.
const CustomerEmailRule = "an address such as name@example.com: at most 64 letters (a–z), digits and . _ + - " +
	"before the @ (no dot first, last or twice in a row), and a domain name of at least two labels of " +
	"letters, digits and hyphens after it, ending in a top-level domain that starts with a letter " +
	"(an internationalised domain in its xn-- form); at most 254 characters in all"

// Upper bounds of an address (RFC 5321, 4.5.3.1).
const (
	MaxEmailLen      = 254
	MaxEmailLocalLen = 64
)

var (
	emailLocal  = regexp.MustCompile(`^[A-Za-z0-9_+\-]+(?:\.[A-Za-z0-9_+\-]+)*$`)
	emailDomain = regexp.MustCompile(`^(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?$`)
	// emailInText finds an address of the accepted form in text, also in
	// a URL's query. It may take in more than the address (a character
	// of the form just before it): masking more is safe, less is not.
	emailInText = regexp.MustCompile(`(?:[A-Za-z0-9_+.\-]|%2[Bb])+(?:@|%40)[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+`)
	// topLevel is a last label the masked form may keep.
	topLevel = regexp.MustCompile(`^[A-Za-z]{2,63}$`)
)

// CheckCustomerEmail says whether addr is of the accepted form
// (CustomerEmailRule); its error is an EInvalid naming the rule.
func CheckCustomerEmail(addr string) error {
	local, domain, ok := strings.Cut(addr, "@")
	if !ok || len(addr) > MaxEmailLen || len(local) > MaxEmailLocalLen || !emailLocal.MatchString(local) || !emailDomain.MatchString(domain) {
		if !CleanText(addr) || len(addr) > MaxEmailLen+10 {
			return Errorf(EInvalid, "customer_email is not an email address: it must be %s", CustomerEmailRule)
		}
		return Errorf(EInvalid, "customer_email %q is not an email address: it must be %s", addr, CustomerEmailRule)
	}
	return nil
}

// MaskEmail is addr as a viewer sees it: the first character of the
// part before the last @, ***, @, the first character of the domain, ***
// and the domain's last label when it is letters alone ("b***@e***.com").
// Every string has one, so that an address stored before the rule is
// masked too. The same address is always masked the same way.
func MaskEmail(addr string) string {
	at := strings.LastIndex(addr, "@")
	if at < 0 {
		return firstRune(addr) + "***"
	}
	return firstRune(addr[:at]) + "***@" + maskDomain(addr[at+1:])
}

func maskDomain(domain string) string {
	out := firstRune(domain) + "***"
	if dot := strings.LastIndex(domain, "."); dot >= 0 && topLevel.MatchString(domain[dot+1:]) {
		out += "." + domain[dot+1:]
	}
	return out
}

func firstRune(s string) string {
	if s == "" {
		return ""
	}
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError || !CleanText(s[:n]) {
		return ""
	}
	return s[:n]
}

// MaskEmailsIn masks, in text, each of the known addresses (written as
// it is, JSON-escaped, HTML-escaped or in a URL's query: an address kept
// before the rule may be of any form), then every other address of the
// accepted form, leaving those keep says to keep (compared in lower
// case). The masked forms are not themselves found again.
func MaskEmailsIn(text string, known []string, keep func(lower string) bool) string {
	if len(known) > 0 {
		var pairs []string
		for _, addr := range known {
			if addr == "" || keep(strings.ToLower(addr)) {
				continue
			}
			m := MaskEmail(addr)
			for _, form := range writtenForms(addr) {
				pairs = append(pairs, form, m)
			}
		}
		text = strings.NewReplacer(pairs...).Replace(text)
	}
	return emailInText.ReplaceAllStringFunc(text, func(m string) string {
		plain := strings.NewReplacer("%40", "@", "%2B", "+", "%2b", "+").Replace(m)
		if keep(strings.ToLower(plain)) {
			return m
		}
		masked := MaskEmail(plain)
		if !strings.Contains(m, "@") {
			masked = strings.Replace(masked, "@", "%40", 1)
		}
		return masked
	})
}

// jsonEscaped is s as a JSON string holds it, without the quotes.
func jsonEscaped(s string) string {
	j, _ := json.Marshal(s)
	return string(j[1 : len(j)-1])
}

// writtenForms are the ways addr may be written in an answer: a kept
// JSON body is itself a string in a JSON answer.
func writtenForms(addr string) []string {
	inJSON := jsonEscaped(addr)
	forms := []string{addr, inJSON, jsonEscaped(inJSON), html.EscapeString(addr), html.EscapeString(inJSON),
		url.QueryEscape(addr), url.PathEscape(addr)}
	seen := make(map[string]bool, len(forms))
	out := forms[:0]
	for _, f := range forms {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}
