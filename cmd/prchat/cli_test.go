package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/chat/chattest"
)

// run runs prchat with args and the environment env, and returns its exit
// code and output.
func run(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(t.Context(), args, func(k string) string { return env[k] }, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestHelpPrintsToStdout: --help (and -h) of every command prints its
// usage to stdout and exits 0.
func TestHelpPrintsToStdout(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"help"}, {"--help"},
		{"serve", "--help"}, {"api", "-h"}, {"worker", "--help"}, {"migrate", "--help"},
		{"ask", "--help"}, {"review", "--help"}, {"review", "record", "-h"},
	} {
		code, out, errOut := run(t, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "Usage: prchat") || errOut != "" {
			t.Errorf("prchat %s: exit %d, stdout %.40q, stderr %q; want 0 and the usage on stdout", strings.Join(args, " "), code, out, errOut)
		}
	}
	_, out, _ := run(t, nil, "ask", "--help")
	if !strings.Contains(out, "-no-stream") {
		t.Errorf("ask --help lacks its flags:\n%s", out)
	}
}

// TestUsageMistakesExitTwo: a mistake in the command line exits 2 with one
// line that names the command once, and starts nothing.
func TestUsageMistakesExitTwo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "extra"}, `prchat serve: unexpected argument "extra" (see --help)`},
		{[]string{"serve", "--no-such-flag"}, "prchat serve: flag provided but not defined: -no-such-flag (see --help)"},
		{[]string{"migrate", "--cpuprofile", "x"}, "prchat migrate: flag provided but not defined: -cpuprofile (see --help)"},
		{[]string{"serve", "--bench-agent"}, "prchat serve: flag provided but not defined: -bench-agent (see --help)"},
		{[]string{"ask", "--pr", "abc", "q"}, `prchat ask: invalid value "abc" for flag -pr: parse error (see --help)`},
		{[]string{"ask", "--repo", "a/b", "--pr", "1"}, "prchat ask: a question is required (see --help)"},
		{[]string{"ask", "--repo", "a/b", "q"}, "prchat ask: give --repo and --pr for a new conversation, or --conversation (see --help)"},
		{[]string{"review"}, "prchat review: the only review subcommand is record (see --help)"},
		{[]string{"review", "record", "--pr", "x"}, `prchat review: invalid value "x" for flag -pr: parse error (see --help)`},
		{[]string{"review", "record", "--repo", "a/b"}, "prchat review: --repo, --pr and --markdown-file are required (see --help)"},
	} {
		code, out, errOut := run(t, map[string]string{"PRCHAT_SERVER": "http://127.0.0.1:1"}, tc.args...)
		cmd := "prchat " + tc.args[0]
		if code != 2 || out != "" || !strings.HasPrefix(errOut, tc.want) || strings.Count(errOut, "\n") != 1 || strings.Count(errOut, cmd) != 1 {
			t.Errorf("prchat %s: exit %d, stdout %q, stderr %q; want 2 and one line %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}
	if code, _, errOut := run(t, nil); code != 2 || !strings.HasPrefix(errOut, "Usage: prchat") {
		t.Errorf("prchat alone: exit %d, stderr %q; want 2 and the usage", code, errOut)
	}
	for _, cmd := range []string{"frobnicate", "bench"} {
		if code, _, errOut := run(t, nil, cmd); code != 2 || !strings.HasPrefix(errOut, `prchat: unknown command "`+cmd+`"`) {
			t.Errorf("unknown command %s: exit %d, stderr %q", cmd, code, errOut)
		}
	}
}

// TestBadSettingsRefusedAtStart: a setting out of its range stops the
// daemon before it opens anything, with a message naming the variable.
func TestBadSettingsRefusedAtStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env, value, want string
	}{
		{"PRCHAT_DEFAULT_BACKEND", "gpt", `prchat serve: PRCHAT_DEFAULT_BACKEND (--default-backend): "gpt" is none of local, openai, claude-code, codex`},
		{"PRCHAT_TURN_TIMEOUT", "-5m", "prchat serve: PRCHAT_TURN_TIMEOUT (--turn-timeout): must be above zero, not -5m0s"},
		{"PRCHAT_TURN_TIMEOUT", "0s", "prchat serve: PRCHAT_TURN_TIMEOUT (--turn-timeout): must be above zero, not 0s"},
	} {
		dir := t.TempDir()
		code, _, errOut := run(t, map[string]string{tc.env: tc.value, "PRCHAT_DATA_DIR": dir, "PRCHAT_LISTEN": "127.0.0.1:0"}, "serve")
		if code != 1 || strings.TrimSpace(errOut) != tc.want {
			t.Errorf("%s=%s: exit %d, stderr %q; want 1 and %q", tc.env, tc.value, code, errOut, tc.want)
		}
	}
	// Each backend named is taken.
	for _, b := range defaultBackends() {
		cfg, err := loadConfig("serve", []string{"--default-backend", b}, func(string) string { return "" }, io.Discard)
		if err != nil || cfg.DefaultBackend != b {
			t.Errorf("--default-backend %s: %v, %q", b, err, cfg.DefaultBackend)
		}
	}
}

// TestSecretsOfTheURLs: the passwords in the database and Redis URLs are
// among the masked secrets, decoded; a URL without one adds nothing.
func TestSecretsOfTheURLs(t *testing.T) {
	t.Parallel()
	c := Config{DatabaseURL: "postgres://prchat:pg%40pass-1@db:5432/prchat", RedisURL: "redis://:redis-pass-2@cache:6379/0"}
	got := c.secrets()
	for _, want := range []string{"pg@pass-1", "redis-pass-2"} {
		if !slices.Contains(got, want) {
			t.Errorf("secrets %q lack %q", got, want)
		}
	}
	c = Config{DatabaseURL: "postgres://prchat@db/prchat", RedisURL: "redis://cache:6379/0"}
	for _, s := range c.secrets() {
		if s != "" {
			t.Errorf("secrets of URLs without passwords = %q", c.secrets())
		}
	}
}

// TestNoBenchAgent: a production build has no bench agent: no review can
// name it (a prchatbench build's is tested in backends_bench_test.go).
func TestNoBenchAgent(t *testing.T) {
	t.Parallel()
	if len(buildBackends()) > 0 {
		t.Skip("a prchatbench build")
	}
	base, repo := bootBench(t)
	var e struct{ Error struct{ Code string } }
	doAt(t, base, "POST", "/api/v1/repos/bench/repo/pulls/1/reviews", map[string]any{"head_sha": repo.Head(), "backend": "bench", "markdown": "r"}, http.StatusUnprocessableEntity, &e)
	if e.Error.Code != "unsupported_backend" {
		t.Errorf("review naming the bench agent: %+v, want unsupported_backend", e)
	}
}

// bootBench starts a serve daemon of this build with a repository
// bench/repo registered, and returns its URL and the repository.
func bootBench(t *testing.T) (string, agentsessiontest.Repo) {
	t.Helper()
	repo := agentsessiontest.NewRepo(t, map[string]string{"bench.txt": "bench\n"})
	env := map[string]string{"PRCHAT_DATA_DIR": t.TempDir(), "PRCHAT_LISTEN": "127.0.0.1:0", "PRCHAT_LOG_LEVEL": "error"}
	d, _, _, err := startDaemon(context.Background(), "serve", nil, func(k string) string { return env[k] }, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	doAt(t, d.URL(), "POST", "/api/v1/repos", map[string]any{"name": "bench/repo", "clone_path": repo.Dir}, http.StatusCreated, nil)
	return d.URL(), repo
}

// TestCPUProfileFlag: a daemon started with --cpuprofile writes a CPU
// profile of its run there once it stops; migrate has no such flag.
func TestCPUProfileFlag(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "cpu.out")
	env := map[string]string{"PRCHAT_DATA_DIR": t.TempDir(), "PRCHAT_LISTEN": "127.0.0.1:0", "PRCHAT_LOG_LEVEL": "error"}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"serve", "--cpuprofile", file}, func(k string) string { return env[k] }, io.Discard, io.Discard)
	}()
	// The profile file is made once the daemon runs.
	defer cancel()
	chattest.Eventually(t, "the profile file "+file, func() bool { _, err := os.Stat(file); return err == nil })
	cancel()
	if code := chattest.Receive(t, "serve to exit", done); code != 0 {
		t.Fatalf("serve --cpuprofile exited %d", code)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		t.Errorf("profile %s is %d bytes, not a gzipped pprof profile", file, len(data))
	}
	if code, _, errOut := run(t, nil, "migrate", "--cpuprofile", file); code != 2 || !strings.Contains(errOut, "-cpuprofile") {
		t.Errorf("migrate --cpuprofile: exit %d, stderr %q; want 2 and a usage mistake", code, errOut)
	}
}
