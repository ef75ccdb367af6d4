package agentsessiontest

import (
	"os"
	"path/filepath"
	"testing"
)

// CLI returns an agent CLI's binary for tests: the path in the environment
// variable env, else cachePath under the user's home directory (where
// prchat's CI installs the pinned CLIs). A CLI that is missing fails the
// test when CI is set or env names it (in CI a missing CLI is a failure),
// and skips it otherwise.
func CLI(tb testing.TB, name, env, cachePath string) string {
	tb.Helper()
	bin := os.Getenv(env)
	named := bin != ""
	if !named {
		home, err := os.UserHomeDir()
		if err != nil {
			tb.Fatalf("no home directory to find the %s CLI in: %v", name, err)
		}
		bin = filepath.Join(home, cachePath)
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		msg := "the " + name + " CLI is not installed at " + bin + " (set " + env + ")"
		if named || os.Getenv("CI") != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return bin
}
