package views

import "context"

// The page's components learn the logged-in admin's role from the
// context the page is rendered with (WithRole), so that a page shows only
// the actions that role may take. The server still refuses the others:
// hiding a button is for the reader, not a guard.

type roleKey struct{}

// WithRole returns ctx carrying the logged-in admin's role.
func WithRole(ctx context.Context, role string) context.Context {
	return context.WithValue(ctx, roleKey{}, role)
}

func roleIn(ctx context.Context) string {
	role, _ := ctx.Value(roleKey{}).(string)
	return role
}

// CanAct says whether the page's reader may change anything: an operator
// or an owner. A viewer, and a page rendered with no role, may not.
func CanAct(ctx context.Context) bool {
	role := roleIn(ctx)
	return role == "operator" || role == "owner"
}

// IsOwner says whether the page's reader is an owner.
func IsOwner(ctx context.Context) bool { return roleIn(ctx) == "owner" }
