package web

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/models"
)

// httpStatusWant is the status of each error code, as the table in
// docs/api.md#error-codes gives it.
var httpStatusWant = map[string]int{
	models.EInvalid:              422,
	models.ENotFound:             404,
	models.EInsufficientStock:    409,
	models.EInvalidTransition:    409,
	models.EChargeDisputed:       409,
	models.EIdempotencyMissing:   400,
	models.EIdempotencyReused:    422,
	models.EIdempotencyTooShort:  422,
	models.ERequestInProgress:    409,
	models.EIdempotencyInvalid:   400,
	models.EInvalidPayload:       400,
	models.EUnknownParameter:     400,
	models.EMissingField:         422,
	models.EInvalidSignature:     401,
	models.ETooLarge:             413,
	models.EUnsupportedMediaType: 415,
	models.EUnauthorized:         401,
	models.EConflict:             409,
	models.EAlreadyExists:        409,
	models.ERejected:             422,
	models.EForbidden:            403,
	models.EMethodNotAllowed:     405,
	models.ETooManyRequests:      429,
	models.EUnavailable:          503,
	models.EInternal:             500,
}

// Every error code has its one HTTP status, as docs/api.md#error-codes
// gives it.
func TestHTTPStatus(t *testing.T) {
	t.Parallel()
	for code, want := range httpStatusWant {
		if got := httpStatus(code); got != want {
			t.Errorf("HTTPStatus(%q) = %d, want %d", code, got, want)
		}
	}
	if got := httpStatus(""); got != 200 {
		t.Errorf(`HTTPStatus("") = %d, want 200`, got)
	}
	if got := httpStatus("no_such_code"); got != 500 {
		t.Errorf(`HTTPStatus("no_such_code") = %d, want 500`, got)
	}
}

// A code added to models/errors.go without a row above would go untested.
func TestHTTPStatusTableCoversErrorsGo(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "../models/errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "E") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				codes = append(codes, v)
			}
		}
	}
	if len(codes) < 10 {
		t.Fatalf("found only %d codes in errors.go: %v", len(codes), codes)
	}
	for _, c := range codes {
		if _, ok := httpStatusWant[c]; !ok {
			t.Errorf("code %q in errors.go has no expected HTTP status in this test", c)
		}
	}
	if len(codes) != len(httpStatusWant) {
		t.Errorf("errors.go has %d codes, the test expects %d", len(codes), len(httpStatusWant))
	}
}

// A callback is answered with the status the rest of the API gives the
// same code: app/payments keeps its own table of the codes it answers
// with, and this holds it to web's.
func TestCallbackAnswersAgreeWithTheAPI(t *testing.T) {
	t.Parallel()
	for code, status := range payments.AnswerStatuses() {
		if got := httpStatus(code); got != status {
			t.Errorf("code %q: payments answers %d, web %d", code, status, got)
		}
	}
}
