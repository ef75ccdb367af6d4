package agentsessiontest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prchat/prchat/chat"
)

// EnvHarness describes a backend that starts processes, for RunChildEnv.
type EnvHarness struct {
	// New returns a backend that runs c.Bin instead of its CLI, configured
	// with c.Secrets as the daemon's configured secrets and c.ExtraEnv as
	// the variables the operator passes on (PRCHAT_AGENT_ENV). Required.
	New func(t *testing.T, c EnvCase) chat.Backend
	// ModelEnv names variables the backend passes on to reach its model
	// (its API key, its endpoint, ...): the suite plants each with a
	// harmless value and checks that it arrives.
	ModelEnv []string
}

// EnvCase is what RunChildEnv gives EnvHarness.New.
type EnvCase struct {
	// Bin is a stand-in for the backend's CLI: it records its environment
	// and exits with status 3.
	Bin string
	// Secrets are the daemon's configured secret values.
	Secrets []string
	// ExtraEnv names the variables the operator passes on on purpose.
	ExtraEnv []string
}

// Planted is what PlantEnv put in the process's environment.
type Planted struct {
	// Secrets maps the name of each planted secret variable to its value;
	// none may reach an agent's process.
	Secrets map[string]string
	// Configured are the values given to the backend as the daemon's
	// configured secrets (some of them planted under names the policy
	// would otherwise let through).
	Configured []string
	// Allowed maps variables that must reach the process to their values.
	Allowed map[string]string
	// ExtraEnv names the variables planted for the operator to pass on:
	// one harmless (in Allowed), one holding a configured secret (in
	// Secrets).
	ExtraEnv []string
}

// PlantEnv sets, with t.Setenv (so the test must not be parallel), the
// variables a worker's environment may hold: prchat's own PRCHAT_*
// settings, a host's cloud and service credentials, configured secrets
// under names the policy lets through (a proxy URL, a variable the
// operator passes on), and harmless variables of the common list, of
// modelEnv and of ExtraEnv, which must arrive.
func PlantEnv(t *testing.T, modelEnv ...string) Planted {
	t.Helper()
	tag := randomTag()
	p := Planted{
		Secrets: map[string]string{
			"PRCHAT_OPENAI_API_KEY":   "sk-prchat-openai-" + tag,
			"PRCHAT_GITHUB_TOKEN":     "ghp_prchatgithub" + tag,
			"PRCHAT_SECRET_KEY":       "prchat-secret-key-" + tag,
			"PRCHAT_DATABASE_URL":     "postgres://prchat:prchat-db-pass-" + tag + "@db:5432/prchat",
			"PRCHAT_GITLAB_TOKEN":     "glpat-prchat-" + tag,
			"AWS_ACCESS_KEY_ID":       "AKIAHOST" + strings.ToUpper(tag),
			"AWS_SECRET_ACCESS_KEY":   "aws-secret-access-" + tag,
			"AWS_SESSION_TOKEN":       "aws-session-token-" + tag,
			"GITHUB_TOKEN":            "ghp_hostgithub" + tag,
			"GH_TOKEN":                "gho_hostgh" + tag,
			"DATABASE_URL":            "postgres://app:host-db-pass-" + tag + "@db:5432/app",
			"REDIS_URL":               "redis://:host-redis-pass-" + tag + "@cache:6379/0",
			"GOOGLE_API_KEY":          "google-api-key-" + tag,
			"AZURE_CLIENT_SECRET":     "azure-client-secret-" + tag,
			"NPM_TOKEN":               "npm_host" + tag,
			"SLACK_BOT_TOKEN":         "xoxb-host-" + tag,
			"HTTPS_PROXY":             "http://proxyuser:configured-proxy-pass-" + tag + "@127.0.0.1:9",
			"PRCHAT_AGENT_TEST_EXTRA": "never-" + tag,
			"OPERATOR_TOKEN":          "configured-operator-token-" + tag,
		},
		Allowed: map[string]string{
			"LANG":          "C.UTF-8",
			"LC_MESSAGES":   "C",
			"TZ":            "UTC",
			"NO_PROXY":      "localhost,127.0.0.1",
			"SSL_CERT_DIR":  "/etc/ssl/certs",
			"TMPDIR":        os.TempDir(),
			"OPERATOR_TEAM": "visible-" + tag,
		},
		ExtraEnv: []string{"OPERATOR_TEAM", "OPERATOR_TOKEN"},
	}
	p.Configured = []string{
		p.Secrets["PRCHAT_OPENAI_API_KEY"], p.Secrets["PRCHAT_GITHUB_TOKEN"], p.Secrets["PRCHAT_SECRET_KEY"],
		p.Secrets["PRCHAT_GITLAB_TOKEN"], "prchat-db-pass-" + tag,
		"configured-proxy-pass-" + tag, p.Secrets["OPERATOR_TOKEN"],
	}
	for _, n := range modelEnv {
		p.Allowed[n] = "model-setting-" + strings.ToLower(n) + "-" + tag
	}
	for k, v := range p.Secrets {
		t.Setenv(k, v)
	}
	for k, v := range p.Allowed {
		t.Setenv(k, v)
	}
	return p
}

func randomTag() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Check checks an agent process's environment (KEY=value entries) or any
// text it produced (what the agent printed of it): no planted secret value
// and no configured secret appears in it, nor any PRCHAT_* variable. It
// returns how many secrets reached it.
func (p Planted) Check(t testing.TB, env []string, what string) int {
	t.Helper()
	text := strings.Join(env, "\n")
	var reached []string
	for k, v := range p.Secrets {
		if strings.Contains(text, v) {
			reached = append(reached, k)
		}
	}
	for _, v := range p.Configured {
		if strings.Contains(text, v) && !slices.ContainsFunc(reached, func(k string) bool { return strings.Contains(p.Secrets[k], v) }) {
			reached = append(reached, "(configured secret)")
		}
	}
	sort.Strings(reached)
	if len(reached) > 0 {
		t.Errorf("%s: %d of %d planted secrets reached it: %s", what, len(reached), len(p.Secrets), strings.Join(reached, ", "))
	}
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(strings.ToUpper(k), "PRCHAT_") {
			t.Errorf("%s: it got prchat's variable %s", what, k)
		}
	}
	return len(reached)
}

// CheckAllowed checks that every Allowed variable is in env with its value.
func (p Planted) CheckAllowed(t testing.TB, env []string, what string) {
	t.Helper()
	for k, v := range p.Allowed {
		if !slices.Contains(env, k+"="+v) {
			t.Errorf("%s: %s=%s did not reach it", what, k, v)
		}
	}
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) {
		t.Errorf("%s: PATH did not reach it", what)
	}
}

// EnvRecorder writes a stand-in program to a temporary directory that
// records its environment (one KEY=value a line) to a file and exits with
// status 3. It returns the program and a function that reads what the
// last run recorded (failing the test when nothing was).
func EnvRecorder(t testing.TB) (bin string, recorded func() []string) {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "env.out")
	bin = filepath.Join(dir, "agent-cli")
	script := "#!/bin/sh\nenv > '" + out + "'\nexit 3\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, func() []string {
		t.Helper()
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("the stand-in CLI did not run: %v", err)
		}
		return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	}
}

// RunChildEnv checks that the environment of the process a backend starts
// holds none of the daemon's secrets: with prchat's PRCHAT_* variables, a
// host's cloud credentials and the daemon's configured secrets planted in
// the process environment (PlantEnv), one call of the backend runs a
// stand-in CLI that records its environment, which must hold none of them
// and must hold the common variables, the backend's ModelEnv and what the
// operator passes on.
//
// It sets environment variables, so call it from a test that is not
// parallel (and whose parents are not).
func RunChildEnv(t *testing.T, h EnvHarness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("agentsessiontest: EnvHarness.New is nil")
	}
	planted := PlantEnv(t, h.ModelEnv...)
	bin, recorded := EnvRecorder(t)
	b := h.New(t, EnvCase{Bin: bin, Secrets: planted.Configured, ExtraEnv: planted.ExtraEnv})
	ctx, cancel := context.WithTimeout(t.Context(), RunTimeout())
	defer cancel()
	_, _ = b.Run(ctx, chat.RunRequest{
		Mode:      chat.SessionSeeded,
		Dir:       t.TempDir(),
		Prompt:    "Question: " + Question,
		System:    "You answer a reviewer's follow-up questions.",
		Schema:    json.RawMessage(chat.AnswerSchema),
		MaxCalls:  10,
		MaxTokens: 200_000,
		Question:  Question,
	}, func(chat.Event) {})
	env := recorded()
	what := b.Name() + "'s child process"
	if n := planted.Check(t, env, what); n == 0 {
		t.Logf("%s: 0 of %d planted secrets reached it (%d variables passed on)", what, len(planted.Secrets), len(env))
	}
	planted.CheckAllowed(t, env, what)
}
