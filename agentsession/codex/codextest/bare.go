package codextest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/codex"
)

// Bare runs `codex exec` itself in dir with the sandbox given (read-only,
// workspace-write), as a reviewing agent would, with the environment and
// home of cfg, and returns the id of the thread it started. A failed run
// fails the test.
func Bare(tb testing.TB, cfg codex.Config, dir, sandbox, prompt string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentsessiontest.RunTimeout())
	defer cancel()
	// No shell snapshot: its background login shell would outlive the run.
	args := append([]string{"exec", "--json", "-C", dir, "-s", sandbox, "-m", Model, "--disable", "shell_snapshot"}, cfg.ExtraArgs...)
	cmd := exec.CommandContext(ctx, cfg.Bin, append(args, "--", prompt)...)
	cmd.Env = append(append(os.Environ(), cfg.Env...), "CODEX_HOME="+cfg.Home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("codextest: codex exec: %v\n%s%s", err, out, stderr.Bytes())
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		var ev struct {
			Type     string `json:"type"`
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "thread.started" {
			return ev.ThreadID
		}
	}
	tb.Fatalf("codextest: codex exec started no thread:\n%s", out)
	return ""
}
