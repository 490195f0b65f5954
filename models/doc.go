// Package models holds Sekali's domain: the GORM structs that mirror the
// tables of the migrations, the status enums, the pure transition rules of
// the order and payment state machine, and the error codes every layer
// speaks. It does no I/O: no database calls, no HTTP, no queue.
package models
