package agentsession

import (
	"context"
	"os/exec"
	"time"
)

// killGrace is how long Wait waits for a killed process's output pipes to
// close (a grandchild may still hold them) before closing them itself.
const killGrace = 2 * time.Second

// Command returns a command that runs name with args in a process group of
// its own. When ctx ends, the whole group is killed (on Unix), so a CLI
// agent's children die with it, and Wait returns within a few seconds even
// if a grandchild kept the output pipes open. Stdin, unless the caller sets
// it, is the null device.
//
// Backends that start agent processes use it so that a turn's timeout or
// cancellation kills the agent's process tree, as the contract requires.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	setProcessGroup(cmd)
	cmd.WaitDelay = killGrace
	return cmd
}
