package web

import "testing"

// Accept is read with its weights and the most specific range that
// matches, so a browser's */* does not make it a JSON client.
func TestPreferredType(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ accept, want string }{
		{"", ""},
		{"*/*", ""},
		{"application/json", "json"},
		{"application/json; charset=utf-8", "json"},
		{"application/*", "json"},
		{"text/html", "html"},
		{"text/*", "html"},
		{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "html"}, // a browser
		{"application/json, text/html;q=0.9", "json"},
		{"text/html;q=0.5, application/json", "json"},
		{"application/json, text/html", ""},
		{"application/json;q=0, */*", "html"},
		{"*/*;q=0.1, application/json", "json"},
		{"garbage, application/json", "json"},
	} {
		if got := preferredType(tt.accept); got != tt.want {
			t.Errorf("Accept %q: %q, want %q", tt.accept, got, tt.want)
		}
	}
}
