//go:build !linux

package codex

import "os/exec"

// killTree keeps agentsession.Command's cancellation (a kill of the CLI's
// process group) where /proc cannot tell the CLI's descendants.
func killTree(*exec.Cmd, string) {}
