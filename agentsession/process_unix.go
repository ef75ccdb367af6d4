//go:build unix

package agentsession

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup makes cmd the leader of a new process group and makes its
// cancellation kill the whole group. Where the system allows it (Linux),
// the leader is also killed when the daemon dies without cancelling it
// (SIGKILL, a crash), so that an agent does not go on calling its model
// for a turn another worker takes over.
func setProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	dieWithDaemon(cmd.SysProcAttr)
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
}
