package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDaemonGivesAgentsNoSecrets boots a daemon whose Claude Code binary is
// a stand-in that records its environment: the daemon's configured secrets
// (its API keys and its database password) and the host's other variables
// never reach it, what PRCHAT_AGENT_ENV names does. Not parallel: it sets
// the process environment.
func TestDaemonGivesAgentsNoSecrets(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "env.txt")
	bin := filepath.Join(dir, "claude")
	script := "#!/bin/sh\nenv > " + record + "\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	const openAIKey = "sk-daemon-own-openai-key-0123456789abcdef"
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-host-secret-0123456789")
	t.Setenv("OPENAI_API_KEY", openAIKey)    // the daemon's own key under a CLI's name
	t.Setenv("ANTHROPIC_API_KEY", openAIKey) // a name Claude Code may see, holding the daemon's key
	t.Setenv("PRCHAT_GITHUB_TOKEN", "ghp_daemonsowntokenvalue0123456789ab")
	t.Setenv("TEAM_PROXY_NOTE", "passed-on-purpose")
	e := prepare(t, mode{name: "embedded"}, func(c *Config) {
		c.ClaudeBin = bin
		c.OpenAIAPIKey = openAIKey
		c.GitHubToken = "ghp_daemonsowntokenvalue0123456789ab"
		c.AgentEnv = []string{"TEAM_PROXY_NOTE"}
	})
	e.serve(roleOf("serve"))
	conv, _ := e.ask(e.review("claude-code", nil), "Why does Load refuse an empty path?")
	e.wait(conv, 1)
	raw, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("the stand-in CLI never ran: %v", err)
	}
	env := string(raw)
	for _, secret := range []string{openAIKey, "aws-host-secret-0123456789", "ghp_daemonsowntokenvalue0123456789ab"} {
		if strings.Contains(env, secret) {
			t.Errorf("the agent's environment holds the secret %q", secret)
		}
	}
	for _, line := range strings.Split(env, "\n") {
		if strings.HasPrefix(line, "PRCHAT_") {
			t.Errorf("the agent's environment holds %s", line)
		}
	}
	if !strings.Contains(env, "TEAM_PROXY_NOTE=passed-on-purpose") {
		t.Errorf("PRCHAT_AGENT_ENV's variable did not reach the agent:\n%s", env)
	}
}

func TestAgentEnvRefusesPrchatNames(t *testing.T) {
	t.Parallel()
	_, err := loadConfig("serve", nil, func(k string) string {
		if k == "PRCHAT_AGENT_ENV" {
			return "HOME,PRCHAT_OPENAI_API_KEY"
		}
		return ""
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "PRCHAT_AGENT_ENV") {
		t.Fatalf("PRCHAT_AGENT_ENV naming a PRCHAT_ variable: %v", err)
	}
}
