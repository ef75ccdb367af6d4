//go:build !unix

package main

// raiseFileLimit does nothing where there is no RLIMIT_NOFILE.
func raiseFileLimit(int) error { return nil }
