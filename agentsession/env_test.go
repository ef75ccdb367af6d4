package agentsession_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/agentsession/agentsessiontest"
)

func TestEnvPolicy(t *testing.T) {
	t.Parallel()
	base := []string{
		"PATH=/usr/bin",
		"HOME=/home/w",
		"LC_ALL=C.UTF-8",
		"https_proxy=http://proxy:3128",
		"PRCHAT_OPENAI_API_KEY=sk-prchat-0123456789",
		"PRCHAT_DATABASE_URL=postgres://prchat:db-pass-0123@db/prchat",
		"AWS_SECRET_ACCESS_KEY=aws-secret-0123456789",
		"GITHUB_TOKEN=ghp_0123456789abcdef",
		"DATABASE_URL=postgres://app:db-pass-0123@db/app",
		"ANTHROPIC_API_KEY=sk-ant-model-key",
		"ANTHROPIC_BASE_URL=https://api.example",
		"TEAM_SETTING=on",
		"AWS_REGION=eu-west-1",
		"HTTP_PROXY=http://user:sk-prchat-0123456789@proxy:3128", // an allowed name holding a secret
		"=weird",
		"NOEQUALS",
	}
	p := agentsession.EnvPolicy{
		Allow:   []string{"ANTHROPIC_*"},
		Extra:   []string{"TEAM_SETTING", "AWS_REGION"},
		Secrets: []string{"sk-prchat-0123456789", "db-pass-0123", "", "short"},
	}
	env, withheld := p.Env(base, "HOME=/tmp/h", "CODEX_HOME=/tmp/c", "PRCHAT_X=1", "TOKEN=short")
	want := []string{
		"PATH=/usr/bin",
		"HOME=/tmp/h",
		"LC_ALL=C.UTF-8",
		"https_proxy=http://proxy:3128",
		"ANTHROPIC_API_KEY=sk-ant-model-key",
		"ANTHROPIC_BASE_URL=https://api.example",
		"TEAM_SETTING=on",
		"AWS_REGION=eu-west-1",
		"CODEX_HOME=/tmp/c",
	}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("Env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"HTTP_PROXY", "TOKEN"}, withheld); diff != "" {
		t.Errorf("withheld (-want +got):\n%s", diff)
	}
	for _, kv := range env {
		for _, s := range []string{"sk-prchat", "db-pass", "aws-secret", "ghp_"} {
			if strings.Contains(kv, s) {
				t.Errorf("Env passes %s on", kv)
			}
		}
	}

	var zero agentsession.EnvPolicy
	env, _ = zero.Env(base)
	if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "ANTHROPIC_") || strings.HasPrefix(kv, "TEAM_") }) {
		t.Errorf("the zero policy passes on more than CommonEnv: %q", env)
	}
}

func TestParseEnvNames(t *testing.T) {
	t.Parallel()
	got, err := agentsession.ParseEnvNames(" AWS_REGION, AWS_PROFILE ,,AWS_REGION")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"AWS_REGION", "AWS_PROFILE"}, got); diff != "" {
		t.Errorf("ParseEnvNames (-want +got):\n%s", diff)
	}
	if got, err := agentsession.ParseEnvNames(""); err != nil || got != nil {
		t.Errorf("ParseEnvNames(\"\") = %q, %v; want nothing", got, err)
	}
	for _, bad := range []string{"PRCHAT_GITHUB_TOKEN", "prchat_secret_key", "A-B", "1X", "X=1"} {
		if _, err := agentsession.ParseEnvNames("OK," + bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseEnvNames(%q) = %v, want an error naming it", bad, err)
		}
		if err := (agentsession.EnvPolicy{Extra: []string{bad}}).Validate(); err == nil {
			t.Errorf("Validate with Extra %q = nil, want an error", bad)
		}
	}
	if err := agentsession.CheckSettings([]string{"A=1", "PRCHAT_X=1"}); err == nil {
		t.Error("CheckSettings accepted a PRCHAT_* setting")
	}
	if err := agentsession.CheckSettings([]string{"A"}); err == nil {
		t.Error("CheckSettings accepted an entry without =")
	}
}

// TestGitEnv: the git processes that prepare run directories get the
// common variables and git's own (SSH, configuration), none of the
// worker's secrets. It sets environment variables, so it is not parallel.
func TestGitEnv(t *testing.T) {
	planted := agentsessiontest.PlantEnv(t, "GIT_SSH_COMMAND", "SSH_AUTH_SOCK", "GIT_CONFIG_GLOBAL")
	delete(planted.Allowed, "OPERATOR_TEAM") // git takes no operator additions
	bin, recorded := agentsessiontest.EnvRecorder(t)
	_, _ = agentsession.Git{Path: bin, Secrets: planted.Configured}.Output(t.Context(), "", "--version")
	env := recorded()
	planted.Check(t, env, "git")
	planted.CheckAllowed(t, env, "git")
	for _, want := range []string{"GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "GIT_LFS_SKIP_SMUDGE=1"} {
		if !slices.Contains(env, want) {
			t.Errorf("git's environment lacks %s", want)
		}
	}
}
