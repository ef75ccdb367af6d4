//go:build unix

package gitleaksbench

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the test process has used so far (user and
// system, all threads): on a shared machine the masker's own cost, where
// wall time also counts the waits for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
