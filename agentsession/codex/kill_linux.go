//go:build linux

package codex

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// killTree makes cmd's cancellation kill the CLI with every process it
// started. The CLI runs each command in a session of its own (its
// codex-linux-sandbox helper and the shell under it), out of reach of a
// kill of the CLI's process group, and such a command would outlive the
// CLI. So the cancellation freezes the CLI's group and kills, over a few
// rounds, its descendants found through /proc and every process that
// carries the run's marker in its environment (runMarker=mark, which the
// CLI passes on; it finds a command even after it was orphaned), then the
// CLI's group, and sweeps for marked stragglers once more afterwards.
func killTree(cmd *exec.Cmd, mark string) {
	cmd.Cancel = func() error {
		pid := cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGSTOP) // it starts nothing new meanwhile
		for round := 0; round < 5; round++ {
			victims := append(descendants(pid), marked(mark)...)
			for _, d := range victims {
				if d == pid {
					continue
				}
				_ = syscall.Kill(-d, syscall.SIGKILL) // its group, if it leads one
				_ = syscall.Kill(d, syscall.SIGKILL)
			}
			if len(victims) == 0 && round > 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		err := syscall.Kill(-pid, syscall.SIGKILL)
		go func() {
			// A fork in flight when the CLI stopped may still exec.
			for i := 0; i < 10; i++ {
				time.Sleep(50 * time.Millisecond)
				for _, d := range marked(mark) {
					_ = syscall.Kill(-d, syscall.SIGKILL)
					_ = syscall.Kill(d, syscall.SIGKILL)
				}
			}
		}()
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
}

// marked returns the pids of the processes whose environment holds
// runMarker=mark.
func marked(mark string) []int {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil
	}
	needle := runMarker + "=" + mark
	var out []int
	for _, p := range procs {
		env, err := p.Environ() // it may have ended, or be another user's
		if err == nil && slices.Contains(env, needle) {
			out = append(out, p.PID)
		}
	}
	return out
}

// descendants returns the pids of the processes descended from pid, read
// from /proc (nil if it cannot be read).
func descendants(pid int) []int {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue // it ended meanwhile
		}
		children[st.PPID] = append(children[st.PPID], p.PID)
	}
	var out []int
	queue := []int{pid}
	seen := map[int]bool{pid: true}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}
