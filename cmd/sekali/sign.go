package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sekali/sekali/app/stdwebhooks"
)

// sign is `sekali sign`: it prints the Standard Webhooks headers for a
// sandbox callback body, signed with the first SANDBOX_WEBHOOK_SECRET (or
// --secret), so a callback can be sent by hand with curl.
func sign(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("sign", stderr)
	id := fs.String("id", "", "event id (webhook-id), the idempotency key")
	body := fs.String("body", "", "the exact body to sign; - reads it from standard input")
	secret := fs.String("secret", "", "whsec_… secret (default: the first SANDBOX_WEBHOOK_SECRET)")
	ts := fs.Int64("timestamp", 0, "unix seconds (default: now)")
	curl := fs.Bool("curl", false, "print curl -H arguments instead of header lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *id == "" || *body == "" {
		fs.Usage()
		return &exitError{code: 2, msg: "sign needs --id and --body"}
	}
	if *body == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		*body = string(b)
	}
	var key []byte
	if *secret != "" {
		k, err := stdwebhooks.DecodeSecret(*secret)
		if err != nil {
			return fmt.Errorf("--secret: %w", err)
		}
		key = k
	} else {
		cfg, err := loadConfig(getenv)
		if err != nil {
			return err
		}
		key = cfg.SandboxKeys[0]
	}
	at := time.Now()
	if *ts != 0 {
		at = time.Unix(*ts, 0)
	}
	h := stdwebhooks.Headers(key, *id, at, []byte(*body))
	for _, name := range []string{stdwebhooks.HeaderID, stdwebhooks.HeaderTimestamp, stdwebhooks.HeaderSignature} {
		if *curl {
			fmt.Fprintf(stdout, "-H %s:%s ", name, h.Get(name))
		} else {
			fmt.Fprintf(stdout, "%s: %s\n", name, h.Get(name))
		}
	}
	if *curl {
		fmt.Fprintln(stdout)
	}
	return nil
}
