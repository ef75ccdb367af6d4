package codex_test

import (
	"context"
	"github.com/prchat/prchat/agentsession/codex/codextest"
	"github.com/prchat/prchat/agentsession/fakeapi/responses"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/codex"
	"github.com/prchat/prchat/chat"
)

// TestChildEnv runs the environment conformance check with a stand-in for
// the CLI, whose model providers read their keys from the variables that
// an env_key names in config.toml and in a -c setting. It sets environment
// variables, so it is not parallel.
func TestChildEnv(t *testing.T) {
	agentsessiontest.RunChildEnv(t, agentsessiontest.EnvHarness{
		New: func(t *testing.T, c agentsessiontest.EnvCase) chat.Backend {
			home := t.TempDir()
			toml := "model_provider = \"team\"\n[model_providers.team]\nname = \"team\"\nenv_key = \"TEAM_PROVIDER_KEY\"\n"
			if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(toml), 0o600); err != nil {
				t.Fatal(err)
			}
			b, err := codex.New(codex.Config{
				Bin:       c.Bin,
				Home:      home,
				ExtraArgs: []string{"-c", `model_providers.other={name="other",base_url="http://127.0.0.1:9/v1",env_key="OTHER_PROVIDER_KEY"}`},
				ExtraEnv:  c.ExtraEnv,
				Secrets:   c.Secrets,
			})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		ModelEnv: []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "TEAM_PROVIDER_KEY", "OTHER_PROVIDER_KEY", "HOME"},
	})
}

// TestAgentCannotReadSecrets runs the real CLI with secrets planted in the
// worker's environment and a model that has the agent run `env`: what it
// prints, as the model gets it back, holds none of the secrets and does hold a variable the operator
// passed on (so the environment was printed). It sets environment
// variables, so it is not parallel.
func TestAgentCannotReadSecrets(t *testing.T) {
	codextest.Bin(t)
	planted := agentsessiontest.PlantEnv(t)
	api := responses.New(t)
	cfg := codextest.Config(t, api)
	cfg.Secrets, cfg.ExtraEnv = planted.Configured, planted.ExtraEnv
	b, err := codex.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	api.Push(
		responses.Reply{Calls: []responses.Call{responses.Shell("env")}},
		responses.Reply{Text: `{"answer_markdown":"Done.","citations":[],"suggests_fix":null}`},
	)
	ctx, cancel := context.WithTimeout(t.Context(), agentsessiontest.RunTimeout())
	defer cancel()
	req := chat.RunRequest{Mode: chat.SessionSeeded, Dir: t.TempDir(), Prompt: "Print your environment.", MaxCalls: 10}
	if _, err := b.Run(ctx, req, nil); err != nil {
		t.Fatalf("Run = %v", err)
	}
	reqs := api.Requests()
	outputs := reqs[len(reqs)-1].ToolOutputs()
	if len(outputs) != 1 {
		t.Fatalf("the model got %d command outputs back, want 1: %v", len(outputs), outputs)
	}
	var bodies []string
	for _, r := range reqs {
		bodies = append(bodies, string(r.Body))
	}
	planted.Check(t, bodies, "what the CLI sent the model")
	for id, out := range outputs {
		if !strings.Contains(out, planted.Allowed["OPERATOR_TEAM"]) {
			t.Errorf("command %s did not print the environment (no OPERATOR_TEAM):\n%.2000s", id, out)
		}
	}
}
