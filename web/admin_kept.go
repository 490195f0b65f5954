package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/jsondiff"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
	"github.com/sekali/sekali/web/views"
)

// maxChangesShown bounds the paths a conflict lists.
const maxChangesShown = 100

// keptDelivery is delivery d's kept body and headers as the callback's
// page shows them: the body's secrets redacted (payments.RedactedBody),
// as its headers' were when they were kept.
func keptDelivery(d models.CallbackDelivery) views.KeptDelivery {
	k := views.KeptDelivery{DeliveryID: d.ID, ReceivedAt: d.ReceivedAt, Outcome: d.Outcome, Body: bodyText(payments.RedactedBody(d.Body))}
	if len(d.Headers) > 0 {
		_ = json.Unmarshal(d.Headers, &k.Headers) // written by payments as such an object
	}
	return k
}

// Bounds of an indented body. Indenting writes each line's depth again
// as spaces, so the indented text grows with the product of the lines
// and the depth — with the square of the depth for a body that nests at
// every line. A body past either bound is shown as received.
const (
	maxIndentDepth = jsondiff.MaxDepth
	maxIndented    = 256 << 10 // bytes of an indented body
)

// bodyText is a body as a person reads it: JSON indented, other text as
// it is, anything else by its size. JSON too deep or too long to indent
// (maxIndentDepth, maxIndented) is shown as received.
func bodyText(b []byte) string {
	var out bytes.Buffer
	switch {
	case canonjson.Depth(b, maxIndentDepth) <= maxIndentDepth && json.Valid(b) && json.Indent(&out, b, "", "  ") == nil &&
		out.Len() <= maxIndented:
		return out.String()
	case utf8.Valid(b):
		return string(b)
	}
	return fmt.Sprintf("(%d bytes, not text)", len(b))
}

// conflicts sets each conflicting delivery beside the accepted one, with
// the paths where their bodies differ.
func conflicts(accepted *models.CallbackDelivery, refused []models.CallbackDelivery) []views.Conflict {
	out := make([]views.Conflict, 0, len(refused))
	for _, d := range refused {
		c := views.Conflict{Refused: keptDelivery(d), Changes: []views.Change{}}
		switch {
		case accepted == nil:
			c.Why = "the accepted delivery's body is not kept: nothing to compare with"
		default:
			changes, more, err := jsondiff.Diff(payments.RedactedBody(accepted.Body), payments.RedactedBody(d.Body), maxChangesShown)
			switch {
			case errors.Is(err, jsondiff.ErrTooLarge):
				c.TooLarge, c.Why = true, err.Error()
			case err != nil:
				c.Why = "not both JSON: " + err.Error()
			}
			for _, ch := range changes {
				c.Changes = append(c.Changes, views.Change{Path: ch.Path, Kind: ch.Kind, Before: ch.Before, After: ch.After})
			}
			c.More = more
		}
		out = append(out, c)
	}
	return out
}
