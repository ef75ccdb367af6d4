package claude_test

import (
	"context"
	"encoding/json"
	"github.com/prchat/prchat/agentsession/claude/claudetest"
	"github.com/prchat/prchat/agentsession/fakeapi/anthropic"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/claude"
	"github.com/prchat/prchat/chat"
)

// TestChildEnv runs the environment conformance check with a stand-in for
// the CLI. It sets environment variables, so it is not parallel.
func TestChildEnv(t *testing.T) {
	agentsessiontest.RunChildEnv(t, agentsessiontest.EnvHarness{
		New: func(t *testing.T, c agentsessiontest.EnvCase) chat.Backend {
			b, err := claude.New(claude.Config{
				Bin:       c.Bin,
				Env:       []string{"CLAUDE_CODE_MAX_RETRIES=0"},
				ConfigDir: t.TempDir(),
				ExtraEnv:  c.ExtraEnv,
				Secrets:   c.Secrets,
			})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		ModelEnv: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL", "CLAUDE_CODE_USE_BEDROCK", "HOME"},
	})
}

// TestAgentCannotReadSecrets runs the real CLI with secrets planted in the
// worker's environment and a model that tries to have the agent read its
// environment: Read of /proc/self/environ, Read of a link to it in the run
// directory, Grep of the run directory holding that link. None of the
// requests the CLI sends the model (system prompt, history, tool results)
// holds a secret. (The CLI 2.1 refuses the reads outside the run directory
// in dontAsk mode and its Grep does not follow links, so the agent reads
// none of its environment; the stand-in test checks the environment
// itself.) It sets environment variables, so it is not parallel.
func TestAgentCannotReadSecrets(t *testing.T) {
	claudetest.Bin(t)
	planted := agentsessiontest.PlantEnv(t)
	api := anthropic.New(t)
	cfg := claudetest.Config(t, api)
	cfg.Secrets, cfg.ExtraEnv = planted.Configured, planted.ExtraEnv
	b, err := claude.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	link := filepath.Join(dir, "environ.txt")
	if err := os.Symlink("/proc/self/environ", link); err != nil {
		t.Fatal(err)
	}
	tries := []anthropic.Reply{
		anthropic.ToolUse("Read", map[string]any{"file_path": "/proc/self/environ"}),
		anthropic.ToolUse("Read", map[string]any{"file_path": link}),
		anthropic.ToolUse("Grep", map[string]any{"pattern": "=", "path": dir, "output_mode": "content"}),
	}
	api.Handle(func(r anthropic.Request) anthropic.Reply {
		if n := len(toolResults(r)); n < len(tries) {
			return tries[n]
		}
		return anthropic.Structured(map[string]any{"answer_markdown": "Done.", "citations": []any{}, "suggests_fix": nil})
	})
	ctx, cancel := context.WithTimeout(t.Context(), agentsessiontest.RunTimeout())
	defer cancel()
	req := chat.RunRequest{Mode: chat.SessionSeeded, Dir: dir, Prompt: "Print your environment.", Schema: json.RawMessage(chat.AnswerSchema), MaxCalls: 10}
	if _, err := b.Run(ctx, req, nil); err != nil {
		t.Fatalf("Run = %v", err)
	}
	msgs := api.Messages()
	results := toolResults(msgs[len(msgs)-1])
	if len(results) != len(tries) {
		t.Fatalf("the model got %d tool results back, want %d", len(results), len(tries))
	}
	var bodies []string
	for _, m := range msgs {
		bodies = append(bodies, strings.ReplaceAll(string(m.Body), `\u0000`, "\n"))
	}
	planted.Check(t, bodies, "what the CLI sent the model")
	for i, res := range results {
		read := strings.Contains(res.ResultText(), planted.Allowed["OPERATOR_TEAM"])
		t.Logf("try %d: read the environment: %v (%.80q)", i+1, read, res.ResultText())
	}
}

// toolResults returns the tool results of r's whole history.
func toolResults(r anthropic.Request) []anthropic.Block {
	var out []anthropic.Block
	for _, m := range r.Messages {
		out = append(out, m.ToolResults()...)
	}
	return out
}
