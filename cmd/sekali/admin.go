package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/web"
)

// admin is `sekali admin invite EMAIL --role viewer|operator|owner`: it
// prints a one-time link for EMAIL to become an admin with the role (the
// console's Admins page makes the same links). The link starts with
// PUBLIC_URL, or http://localhost and HTTP_ADDR's port without it.
func admin(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "invite" {
		fmt.Fprintln(stderr, "usage: sekali admin invite EMAIL --role viewer|operator|owner")
		return &exitError{code: 2, msg: "admin: the one subcommand is invite"}
	}
	fs := newFlags("admin invite", stderr)
	role := fs.String("role", "viewer", "the new admin's role: viewer, operator or owner")
	rest := args[1:]
	var email string
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		email, rest = rest[0], rest[1:]
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if email == "" && fs.NArg() == 1 {
		email = fs.Arg(0)
	} else if email == "" || fs.NArg() > 0 {
		fs.Usage()
		return &exitError{code: 2, msg: "admin invite: give one email"}
	}
	r, err := admins.ParseRole(*role)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	cfg, db, err := openDatabase(ctx, getenv)
	if err != nil {
		return err
	}
	defer store.Close(db)
	token, err := admins.NewService(db, time.Now).Invite(ctx, email, r, "sekali admin invite")
	if err != nil {
		return err
	}
	base := cfg.PublicURL
	if base == "" {
		_, port, _ := net.SplitHostPort(cfg.HTTPAddr)
		base = "http://localhost:" + port
	}
	fmt.Fprintf(stdout, "Invitation for %s as %s (one use, valid %s):\n%s\n", strings.ToLower(strings.TrimSpace(email)), r,
		admins.InvitationTTL, web.InvitationLink(base, token))
	return nil
}
