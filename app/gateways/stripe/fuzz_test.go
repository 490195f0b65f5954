package stripe_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sekali/sekali/app/gateways/gatewaytest"
	"github.com/sekali/sekali/app/gateways/stripe"
)

// FuzzStripeParse: whatever an event's body, Parse refuses it, ignores
// it, or reads an event the pipeline can apply, and reads the canonical
// spelling of a body as the body (gatewaytest.FuzzParse). The seeds are
// the events in testdata and a few bodies that are not events. make fuzz
// runs it.
func FuzzStripeParse(f *testing.F) {
	seeds := []string{`{"id":"evt_1","type":"payment_intent.succeeded","data":{"object":{}}}`, `{"id":"evt_1"}`, `[]`, `{`}
	names, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(names) == 0 {
		f.Fatalf("no events in testdata: %v", err)
	}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, string(b))
	}
	p, err := stripe.NewProvider(secret)
	if err != nil {
		f.Fatal(err)
	}
	gatewaytest.FuzzParse(f, gatewaytest.ParseCase{Provider: p}, seeds...)
}
