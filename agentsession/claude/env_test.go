package claude_test

import (
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
