package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLockWaitsForAStoppingHolder: a daemon started just as another stops
// finds the data directory's lock still held for a moment (by a child
// forked before the lock was closed, until it starts its program); it
// waits for it rather than refusing to start. A lock held for good is
// still refused, with the holder's pid.
func TestLockWaitsForAStoppingHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := Config{DataDir: dir}
	holder, err := os.OpenFile(filepath.Join(dir, "prchat.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.WriteString("4242\n"); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		time.Sleep(lockWait / 8)
		holder.Close()
		close(released)
	}()
	f, err := lockDataDir(cfg, "serve")
	if err != nil {
		t.Fatalf("a lock released %s after the start: %v", lockWait/8, err)
	}
	<-released
	// Held for good now (by f): refused after lockWait, naming this process.
	_, err = lockDataDir(cfg, "serve")
	if err == nil || !strings.Contains(err.Error(), "another prchat daemon (pid "+strconv.Itoa(os.Getpid())+")") {
		t.Errorf("a second daemon on a held directory: %v", err)
	}
	f.Close()
}
