// Package serveproc builds the app's `sekali` and runs `sekali serve` as
// a process, for the QA module's tests: the replayer's and the k6
// scripts' are run against a real server, as QA runs them.
package serveproc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sekali/sekali/app/testenv"
)

// Build builds the app's cmd/sekali to out, in the app's module at
// appDir (with its go.mod, as make build does).
func Build(appDir, out string) error {
	build := exec.Command("go", "build", "-o", out, "./cmd/sekali")
	build.Dir = appDir
	if msg, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/sekali: %v\n%s", err, msg)
	}
	return nil
}

// Start runs `bin serve` with env (NAME=value) beside this process's
// PATH, HOME, TMPDIR and TZ, its log written to stderr, and returns the
// URL it says it serves on. The server is stopped, and must exit
// cleanly, when the test ends; it never outlives the test's process.
func Start(t testing.TB, bin string, env []string, stderr io.Writer) string {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			t.Errorf("sekali serve: %v", err)
		}
	})
	urls := make(chan string, 1)
	go func() { // reads to the end, so that serve never blocks on its output
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "Sekali is serving on "); ok {
				select {
				case urls <- u:
				default:
				}
			}
		}
	}()
	budget := time.NewTimer(testenv.Budget(t))
	defer budget.Stop()
	select {
	case u := <-urls:
		return u
	case err := <-exited:
		t.Fatalf("sekali serve exited before serving: %v", err)
	case <-budget.C:
		t.Fatal("sekali serve did not say where it serves within the test's budget")
	}
	return ""
}
