package testenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ProcessCPU is the user and system time a process has spent, from
// /proc/<pid>/stat (0 when it cannot be read: the process is gone, or
// this is not Linux). Benchmarks take it from the processes they do not
// run themselves — PostgreSQL's backends, a redis-server — to say where
// the CPU of their work went. Its unit is the clock tick, 10 ms on Linux,
// so a sum over many requests is what is precise.
func ProcessCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // the name may hold spaces
	if len(f) < 13 {
		return 0
	}
	user, _ := strconv.ParseInt(f[11], 10, 64)
	system, _ := strconv.ParseInt(f[12], 10, 64)
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(user+system) * tick
}
