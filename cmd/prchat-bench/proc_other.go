//go:build !linux

package main

import (
	"errors"
	"os/exec"
	"time"
)

// processRSS is only known on Linux (from /proc); elsewhere the memory
// figures are reported as unavailable.
func processRSS(int) (int64, error) {
	return 0, errors.New("RSS is only read on Linux")
}

// processCPU is only known on Linux (from /proc).
func processCPU(int) (time.Duration, error) {
	return 0, errors.New("CPU time is only read on Linux")
}

// processCPUFine is only known on Linux (from /proc).
func processCPUFine(int) (time.Duration, error) {
	return 0, errors.New("CPU time is only read on Linux")
}

// processSwitches is only known on Linux (from /proc).
func processSwitches(int) (switches, error) {
	return unknownSwitches, errors.New("context switches are only read on Linux")
}

// processNamed is only known on Linux.
func processNamed(int, string) bool { return false }

// machineCPU is only read on Linux (from /proc/stat).
func machineCPU() (busy, all time.Duration) { return -1, -1 }

func machineSwitches() int64 { return -1 }

// postmasterOf is only known on Linux.
func postmasterOf(int) (int, error) {
	return 0, errors.New("the Postgres server's processes are only read on Linux")
}

// processTreeCPU is only known on Linux.
func processTreeCPU(int) (time.Duration, error) {
	return 0, errors.New("CPU time is only read on Linux")
}

// loadAverage is only read on Linux.
func loadAverage() string { return "" }

// dieWithParent does nothing outside Linux: the bench stops its daemons on
// its way out.
func dieWithParent(*exec.Cmd) {}

// processTree is a process and its descendants.
type processTree struct {
	pid int
	rss int64
	cpu time.Duration
}

// childTrees is only known on Linux.
func childTrees(int, string) ([]processTree, error) {
	return nil, errors.New("process trees are only read on Linux")
}

// waitedCPU is only known on Linux.
func waitedCPU(int) (time.Duration, error) {
	return 0, errors.New("CPU time is only read on Linux")
}

// memoryPages is only read on Linux.
func memoryPages() string { return "" }
