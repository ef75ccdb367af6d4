package bench

import (
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// processRSS returns the resident set size of process pid (VmRSS).
func processRSS(pid int) (int64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, fmt.Errorf("read RSS of process %d: %w", pid, err)
	}
	st, err := p.NewStatus()
	if err != nil {
		return 0, fmt.Errorf("read RSS of process %d: %w", pid, err)
	}
	return int64(st.VmRSS), nil
}

// processCPU returns the CPU time (user + system) process pid has used.
func processCPU(pid int) (time.Duration, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, fmt.Errorf("read CPU time of process %d: %w", pid, err)
	}
	st, err := p.Stat()
	if err != nil {
		return 0, fmt.Errorf("read CPU time of process %d: %w", pid, err)
	}
	return time.Duration(st.CPUTime() * float64(time.Second)), nil
}

// processCPUFine returns the CPU time the threads of process pid have
// used, to the nanosecond (their schedstat; a thread that exited is not
// counted), where processCPU counts in clock ticks (10 ms): for the small
// figures of an idle daemon.
func processCPUFine(pid int) (time.Duration, error) {
	threads, err := procfs.AllThreads(pid)
	if err != nil {
		return 0, fmt.Errorf("read CPU time of process %d: %w", pid, err)
	}
	var sum time.Duration
	for _, t := range threads {
		st, err := t.Schedstat()
		if err != nil {
			continue // exited meanwhile
		}
		sum += time.Duration(st.RunningNanoseconds)
	}
	return sum, nil
}

// loadAverage returns the one-minute load average, or "" when unknown.
func loadAverage() string {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return ""
	}
	l, err := fs.LoadAvg()
	if err != nil {
		return ""
	}
	return strconv.FormatFloat(l.Load1, 'f', 2, 64)
}

// dieWithParent makes the daemon under test get SIGKILL if the bench dies
// without stopping it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
