package web

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sekali/sekali/app/canonjson"
	"github.com/sekali/sekali/app/idempotency"
	"github.com/sekali/sekali/models"
)

// formKeyField is the hidden field that carries a form's Idempotency-Key.
// The page renders a new key with every form, so a double click, a
// refresh-and-resubmit or two tabs posting the same form run its effect
// once; the second post gets the first one's answer.
const formKeyField = "idempotency_key"

// newFormKey returns a fresh Idempotency-Key for a form.
func newFormKey() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "form-" + hex.EncodeToString(b)
}

// formOnce binds a posted form to its Idempotency-Key, for a service call
// that runs once under it: the fingerprint is target and the form's
// fields (the key itself left out), so the same key with other values is
// refused like the API refuses it.
func (s *Server) formOnce(c echo.Context, scope, target string) (idempotency.Once, error) {
	form, err := c.FormParams()
	if err != nil {
		return idempotency.Once{}, models.Errorf(models.EInvalid, "the form could not be read")
	}
	key, err := idempotency.ParseKey(form.Get(formKeyField))
	if err != nil {
		return idempotency.Once{}, err
	}
	return s.deps.Keys.Once(scope, key, formFingerprint(target, form)), nil
}

// formFingerprint hashes target and the form's fields in name order.
func formFingerprint(target string, form url.Values) string {
	var b strings.Builder
	b.WriteString(target)
	names := make([]string, 0, len(form))
	for name := range form {
		if name != formKeyField {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		for _, v := range form[name] {
			b.WriteString("\n" + url.QueryEscape(name) + "=" + url.QueryEscape(v))
		}
	}
	return canonjson.Hash([]byte(b.String()))
}

// storedError turns a stored 4xx response back into the error it
// answered, for a form to show; nil for a success.
func storedError(resp idempotency.Response) error {
	if resp.Code < 400 {
		return nil
	}
	var p problem
	if err := json.Unmarshal(resp.Body, &p); err != nil || p.Code == "" {
		return models.Errorf(models.EInternal, "the stored answer could not be read")
	}
	return models.Errorf(p.Code, "%s", p.Detail)
}
