//go:build !unix

package agentsession

import "os/exec"

// setProcessGroup leaves cmd as it is: without Unix process groups only the
// process itself is killed when its context ends.
func setProcessGroup(cmd *exec.Cmd) {}
