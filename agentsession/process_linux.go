package agentsession

import "syscall"

// dieWithDaemon has the kernel send the process SIGKILL when the daemon
// that started it dies. Strictly it is sent when the thread that started
// it ends; the Go runtime ends a thread only under a goroutine that locked
// it and returned without unlocking, which prchat does not do.
func dieWithDaemon(a *syscall.SysProcAttr) {
	a.Pdeathsig = syscall.SIGKILL
}
