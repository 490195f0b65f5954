package models

import "time"

// APIIdempotencyKey records a client's Idempotency-Key for one scope
// (orders.create, ...). LockedAt is set while the first request runs;
// ResponseCode and ResponseBody are stored with the effect.
type APIIdempotencyKey struct {
	ID           int64
	Scope        string
	Key          string
	RequestHash  string
	LockedAt     *time.Time
	ResponseCode *int
	ResponseBody *string
	CreatedAt    time.Time
}

// TableName keeps GORM from pluralising the acronym oddly.
func (APIIdempotencyKey) TableName() string { return "api_idempotency_keys" }
