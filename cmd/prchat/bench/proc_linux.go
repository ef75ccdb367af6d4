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
