// Package loadtest is the Go replayer behind `sekali-replay`: the QA
// scenarios of loadtest/k6 (duplicate-storm, burst, race, conflict,
// oversell, steady), run against a live server with vegeta as the load
// generator. Each scenario sets up its own products and orders through the
// API, fires its traffic, checks every answer against what docs/api.md and
// docs/callbacks.md#results promise, and ends by asking the server's integrity audit for a verdict.
package loadtest
