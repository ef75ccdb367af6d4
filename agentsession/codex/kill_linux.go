//go:build linux

package codex

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// killTree makes cmd's cancellation kill the CLI with every process it
// started. The CLI runs each command in a session of its own (its
// codex-linux-sandbox helper and the shell under it), out of reach of a
// kill of the CLI's process group, and such a command would outlive the
// CLI, so the cancellation freezes the CLI's group, finds its descendants
// through /proc, and kills them and their groups as well as the CLI's.
func killTree(cmd *exec.Cmd) {
	cmd.Cancel = func() error {
		pid := cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGSTOP) // it starts nothing new meanwhile
		for _, d := range descendants(pid) {
			_ = syscall.Kill(-d, syscall.SIGKILL) // its group, if it leads one
			_ = syscall.Kill(d, syscall.SIGKILL)
		}
		err := syscall.Kill(-pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
}

// descendants returns the pids of the processes descended from pid, read
// from /proc (nil if it cannot be read).
func descendants(pid int) []int {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue // it ended meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(raw)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		child, err1 := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		parent, err2 := strconv.Atoi(fields[1])
		if err1 == nil && err2 == nil {
			children[parent] = append(children[parent], child)
		}
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
