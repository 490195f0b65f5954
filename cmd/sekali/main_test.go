package main

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestMain runs at least four of this binary's tests at once, unless
// -parallel is given (go test's default is one per core): they mostly
// wait — on the processes they start and kill, Asynq's leases, a Redis
// failover, a browser — and on two cores the minute-long waits held both
// slots while the quick tests queued. No more than the default on a
// bigger machine: each test holds PostgreSQL connections (see
// docs/testing.md, "Connection budget"). Then
// it stops what the tests share once they are all done: the Chromium of
// the browser tests and the built sekali binary.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(max(4, runtime.GOMAXPROCS(0))))
	}
	code := m.Run()
	stopChromium()
	if binaryDir != "" {
		os.RemoveAll(binaryDir)
	}
	os.Exit(code)
}
