package codex_test

import (
	"os"
	"path/filepath"
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
