// Package gatewaycalls makes the calls Sekali itself sends to payment
// gateways — opening a hosted payment page, refunding — exactly once in
// effect. Each call is a gateway_requests row written before it is made,
// with the provider idempotency key it will carry; the call is repeated
// with that key until the gateway gives a definite answer, and a timeout
// is never taken for a failure.
package gatewaycalls
