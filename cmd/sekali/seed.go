package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/catalog"
	"github.com/sekali/sekali/app/store"
)

// seed is `sekali seed`: the demo products and the admin user. Running it
// again changes nothing. (The load tests' database of 200,000 orders is
// made by a binary of their own, loadtest/bulkseed.)
func seed(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("seed", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, db, err := openDatabase(ctx, getenv)
	if err != nil {
		return err
	}
	defer store.Close(db)

	skus, err := catalog.Seed(ctx, db)
	if err != nil {
		return err
	}
	if len(skus) > 0 {
		fmt.Fprintf(stdout, "seed: created products %s\n", strings.Join(skus, ", "))
	} else {
		fmt.Fprintln(stdout, "seed: demo products already exist")
	}
	created, password, err := admins.Ensure(ctx, db, cfg.AdminEmail, cfg.AdminPassword)
	switch {
	case err != nil:
		return err
	case created && password != "":
		fmt.Fprintf(stdout, "seed: created admin %s with password %s (shown only now; set ADMIN_PASSWORD to choose one)\n", cfg.AdminEmail, password)
	case created:
		fmt.Fprintf(stdout, "seed: created admin %s with the password from ADMIN_PASSWORD\n", cfg.AdminEmail)
	default:
		fmt.Fprintf(stdout, "seed: admin %s already exists\n", cfg.AdminEmail)
	}
	return nil
}
