//go:build unix && !linux

package agentsession

import "syscall"

// dieWithDaemon leaves a as it is: only Linux kills a child when its
// parent dies.
func dieWithDaemon(a *syscall.SysProcAttr) {}
