package models

import "time"

// AdminAction is one entry of the admin action log: who did what to
// which target, and how it ended. Log-ins, failed log-ins and log-outs
// are actions too.
type AdminAction struct {
	ID         int64
	AdminEmail string
	Action     string
	Target     string
	Result     string
	Detail     string
	// RemoteAddr is the address the action came from; for an aggregated
	// row of refused log-ins, the client they are counted by (an IPv4
	// address, or an IPv6 network such as 2001:db8:1:2::/64).
	RemoteAddr string
	CreatedAt  time.Time // the last time, for an aggregated row
	// Count and WindowStart aggregate the refused log-ins of one client
	// in one window into one row: how many, since when. A row of one
	// action has Count 1 and no WindowStart.
	Count       int
	WindowStart *time.Time
}

// Admin action results.
const (
	ActionOK      = "ok"      // done
	ActionNoop    = "noop"    // nothing to do: already done, already queued
	ActionRefused = "refused" // not allowed: wrong password, invalid transition
	ActionError   = "error"   // failed; may be tried again
	ActionRed     = "red"     // done, and what it checked is wrong: an audit run that failed checks
)

// ActionCorrectTotal is the action-log name of an owner's correction of
// an order's total: the order's story reads these entries (an index holds
// them alone), so the name is fixed here.
const ActionCorrectTotal = "correct total"

// LoginFailure is one failed admin log-in, kept for a while so that
// guessing can be slowed down per email and per client, across every web
// process. RemoteAddr is the client it counts against: an IPv4 address,
// or an IPv6 network (admins.Reserve).
type LoginFailure struct {
	ID         int64
	Email      string
	RemoteAddr string
	FailedAt   time.Time
}

// TableName names the table after what it belongs to.
func (LoginFailure) TableName() string { return "admin_login_failures" }

// AuditRun is the verdict of one run of the integrity audit, kept so the
// dashboard can show the last one.
type AuditRun struct {
	ID         int64
	OK         bool `gorm:"column:ok"`
	Violations int
	Checks     int
	Drained    bool
	Settling   int
	Summary    string
	TookMS     int `gorm:"column:took_ms"`
	CreatedAt  time.Time
}

// AdminUser may log in to the admin pages.
type AdminUser struct {
	ID           int64
	Email        string
	PasswordHash string
	CreatedAt    time.Time
	// Role is what the admin may do; a new row without one is an owner
	// (the column's default), as the admin made by seed is.
	Role       AdminRole `gorm:"default:owner"`
	DisabledAt *time.Time
	// TOTPSecret is the admin's second factor once confirmed (nil: none);
	// TOTPLastStep the last time step a code was accepted for.
	TOTPSecret        *string `gorm:"column:totp_secret"`
	TOTPLastStep      int64   `gorm:"column:totp_last_step"`
	PasswordChangedAt *time.Time
	// SessionsFrom ends the admin's sessions that logged in before it
	// (nil: none ended so): set when the admin is disabled and when the
	// password changes.
	SessionsFrom *time.Time
}

// AdminRole is what an admin may do in the console. Each role may do
// what the one before it may.
type AdminRole string

const (
	// RoleViewer reads every page, with customers' emails masked, and
	// changes nothing but their own password and second factor.
	RoleViewer AdminRole = "viewer"
	// RoleOperator also acts: re-runs and discards jobs, cancels and
	// refunds orders, restocks, dispatches, applies deliveries again.
	RoleOperator AdminRole = "operator"
	// RoleOwner also manages admins and approves refunds.
	RoleOwner AdminRole = "owner"
)

// AdminRoles are the roles, least first.
var AdminRoles = []AdminRole{RoleViewer, RoleOperator, RoleOwner}

// Allows says whether an admin of role r may do what role need may.
func (r AdminRole) Allows(need AdminRole) bool { return r.rank() >= need.rank() }

func (r AdminRole) rank() int {
	for i, a := range AdminRoles {
		if a == r {
			return i
		}
	}
	return -1
}

// AdminInvitation is a one-time link to become an admin with Role. Only
// the SHA-256 of its token is kept.
type AdminInvitation struct {
	ID        int64
	Email     string
	Role      AdminRole
	TokenHash []byte
	InvitedBy string
	CreatedAt time.Time
	ExpiresAt time.Time
	UsedAt    *time.Time
}

// CatchUpRun is one time Sekali asked the gateways what it may have
// missed since Since (app/catchup): a row written as it starts and
// completed as it ends.
type CatchUpRun struct {
	ID         int64
	StartedAt  time.Time
	FinishedAt *time.Time
	Since      time.Time
	Trigger    string
	// AskedBy is the admin who asked for the run on the console (the
	// worker ran it: Trigger job); "" for the schedule and the command.
	AskedBy  string
	Gateways []CatchUpCount `gorm:"serializer:json;type:jsonb"`
	Error    string
}

// Triggers of a catch-up run.
const (
	CatchUpByCommand = "command" // sekali catch-up
	CatchUpByJob     = "job"     // CATCH_UP_EVERY
)

// CatchUpCount is what one gateway answered in a catch-up run: how many
// questions were asked (orders and refunds, or pages of events), how many
// answers named a payment fact (found), how many of those changed
// something (applied), and the first error, if any.
type CatchUpCount struct {
	Provider string `json:"provider"`
	Asked    int    `json:"asked"`
	Found    int    `json:"found"`
	Applied  int    `json:"applied"`
	Error    string `json:"error,omitempty"`
}
