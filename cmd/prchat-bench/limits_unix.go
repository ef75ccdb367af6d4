//go:build unix

package main

import (
	"fmt"
	"syscall"
)

// raiseFileLimit raises this process's limit of open files (RLIMIT_NOFILE)
// from its soft to its hard limit, which the daemons under test inherit,
// and reports an error if even that is below need.
func raiseFileLimit(need int) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("read the open files limit: %w", err)
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return fmt.Errorf("raise the open files limit to %d: %w", l.Max, err)
		}
	}
	if l.Cur < uint64(need) {
		return fmt.Errorf("the events phase needs %d open files per process and the hard limit (ulimit -Hn) is %d: raise it, or ask for fewer --subscribers", need, l.Cur)
	}
	return nil
}
