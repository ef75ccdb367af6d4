// Package claudetest helps tests run prchat's claude-code backend against
// the real Claude Code CLI and a fake of the Anthropic API (package
// fakeapi/anthropic).
package claudetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/claude"
	"github.com/prchat/prchat/agentsession/fakeapi/anthropic"
)

// BinEnv names the variable that points tests at the claude binary.
const BinEnv = "PRCHAT_TEST_CLAUDE_BIN"

// CachePath is where prchat's CI installs the CLI
// (@anthropic-ai/claude-code) under the user's home directory.
const CachePath = ".cache/prchat/cli/node_modules/.bin/claude"

// Bin returns the claude binary for tests: $PRCHAT_TEST_CLAUDE_BIN, else
// ~/.cache/prchat/... (CachePath). A CLI that is missing fails the test
// when CI is set or the variable names it, and skips it otherwise.
func Bin(tb testing.TB) string {
	tb.Helper()
	return agentsessiontest.CLI(tb, "Claude Code", BinEnv, CachePath)
}

// Config returns a claude-code backend configuration that runs the real
// CLI (Bin) against api, offline, with a HOME and CLAUDE_CONFIG_DIR of the
// test's own (so sessions are stored under it).
func Config(tb testing.TB, api *anthropic.Server) claude.Config {
	tb.Helper()
	home := tb.TempDir()
	return claude.Config{
		Bin: Bin(tb),
		Env: append(api.Env(), "HOME="+home, "CLAUDE_CONFIG_DIR="+home),
	}
}

// Bare runs the CLI itself in dir, as a reviewing agent would (print mode,
// the CLI's default tools), with the environment of cfg and args after the
// output flags (the prompt among them), and returns the id of the session
// it made. A failed run fails the test.
func Bare(tb testing.TB, cfg claude.Config, dir string, args ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentsessiontest.RunTimeout())
	defer cancel()
	cmd := exec.CommandContext(ctx, cfg.Bin, append([]string{"-p", "--output-format", "stream-json", "--verbose", "--max-turns", "10"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), cfg.Env...)
	if cfg.ConfigDir != "" {
		cmd.Env = append(cmd.Env, "CLAUDE_CONFIG_DIR="+cfg.ConfigDir)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("claudetest: claude %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var ev struct {
			Type      string `json:"type"`
			IsError   bool   `json:"is_error"`
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "result" {
			if ev.IsError || ev.SessionID == "" {
				tb.Fatalf("claudetest: claude %s failed: %s", strings.Join(args, " "), sc.Bytes())
			}
			return ev.SessionID
		}
	}
	tb.Fatalf("claudetest: claude %s wrote no result:\n%s", strings.Join(args, " "), out)
	return ""
}

// SessionFile returns the file of session id under the configuration
// directory configDir, found in any project folder; it fails the test
// unless there is exactly one.
func SessionFile(tb testing.TB, configDir, id string) string {
	tb.Helper()
	m, _ := filepath.Glob(filepath.Join(configDir, "projects", "*", id+".jsonl"))
	if len(m) != 1 {
		tb.Fatalf("claudetest: session %s has files %v under %s, want one", id, m, configDir)
	}
	return m[0]
}
