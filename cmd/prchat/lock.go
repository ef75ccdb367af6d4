package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// lockDataDir takes the data directory's lock file for a daemon that keeps
// its state there (the embedded SQLite, or serve's embedded Redis beside
// it): a second such daemon on the same directory would run a second
// embedded Redis over the same database. It returns nil for a daemon on
// Postgres and Redis, whose data directory holds only clones and run
// directories that processes may share. The lock (flock) goes with the
// process, however it ends.
func lockDataDir(cfg Config, cmd string) (*os.File, error) {
	if cfg.DatabaseURL != "" && !(cmd == "serve" && cfg.RedisURL == "") {
		return nil, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	path := filepath.Join(cfg.DataDir, "prchat.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the data directory: %w", err)
	}
	if err := flockSoon(f); err != nil {
		raw, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another prchat daemon"
			if pid, err := strconv.Atoi(string(bytes.TrimSpace(raw))); err == nil {
				who = fmt.Sprintf("another prchat daemon (pid %d)", pid)
			}
			return nil, fmt.Errorf("%s is using the data directory %s: stop it first, or give this one a data directory of its own (--data-dir, PRCHAT_DATA_DIR)", who, cfg.DataDir)
		}
		return nil, fmt.Errorf("lock the data directory: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// lockWait is how long lockDataDir waits for a lock that is held: a
// daemon started just as another stops may find the lock still held for
// a moment, by the stopping process or by a child forked before the lock
// was closed that has not yet started its program (the lock's descriptor
// is closed only then).
const lockWait = 2 * time.Second

// flockSoon takes an exclusive flock of f, trying again for lockWait while
// another holds it.
func flockSoon(f *os.File) error {
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
