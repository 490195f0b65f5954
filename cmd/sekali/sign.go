package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sekali/sekali/app/gateways"
	"github.com/sekali/sekali/app/gateways/sandbox"
)

// sign is `sekali sign`: it signs a callback body the way its gateway
// does, so a callback can be sent by hand with curl. It prints the
// headers to send; for a gateway whose signature is inside the body, it
// prints the body with its signature.
func sign(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("sign", stderr)
	provider := fs.String("provider", sandbox.Name, "the gateway's format: "+strings.Join(gateways.Names(), ", "))
	id := fs.String("id", "", "event id, for a gateway that sends it in a header (required for sandbox); others take theirs from the body")
	body := fs.String("body", "", "the exact body to sign; - reads it from standard input")
	secret := fs.String("secret", "", "the secret (default: the variable the server reads — "+strings.Join(gateways.SecretVariables(), ", ")+" — or, for sandbox, the development secret)")
	ts := fs.Int64("timestamp", 0, "unix seconds (default: now)")
	curl := fs.Bool("curl", false, "print curl -H arguments instead of header lines")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if !slices.Contains(gateways.Names(), *provider) {
		return &exitError{code: 2, msg: fmt.Sprintf("sign: --provider must be one of %s", strings.Join(gateways.Names(), ", "))}
	}
	if *body == "" || (*provider == sandbox.Name && *id == "") {
		fs.Usage()
		return &exitError{code: 2, msg: "sign needs --body (and --id for sandbox)"}
	}
	if *body == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		*body = string(b)
	}
	if *secret == "" {
		if *secret = gateways.DefaultSecret(*provider, getenv); *secret == "" {
			return &exitError{code: 2, msg: fmt.Sprintf("sign: --secret or %s is needed for %s", secretVariableOf(*provider), *provider)}
		}
	}
	sender, err := gateways.NewSender(*provider, *secret)
	if err != nil {
		return fmt.Errorf("--secret: %w", err)
	}
	at := time.Now()
	if *ts != 0 {
		at = time.Unix(*ts, 0)
	}
	h, signed, err := sender.Sign([]byte(*body), *id, at)
	if err != nil {
		return err
	}
	if !bytes.Equal(signed, []byte(*body)) { // the signature is inside the body
		fmt.Fprintf(stdout, "%s\n", signed)
		return nil
	}
	var names []string
	for name := range h {
		if name != "Content-Type" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if *curl {
			fmt.Fprintf(stdout, "-H %s:%s ", strings.ToLower(name), h.Get(name))
		} else {
			fmt.Fprintf(stdout, "%s: %s\n", strings.ToLower(name), h.Get(name))
		}
	}
	if *curl {
		fmt.Fprintln(stdout)
	}
	return nil
}

// secretVariableOf names the variable a gateway's notifications are
// checked with.
func secretVariableOf(provider string) string {
	e, _ := gateways.Find(provider)
	return e.SecretVariable
}
