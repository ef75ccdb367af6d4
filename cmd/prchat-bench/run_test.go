package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prchat/prchat/store/storetest"
	"github.com/prchat/prchat/worker/workertest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if built.Load() {
		if bin, err := benchDaemonBuild(); err == nil {
			_ = os.RemoveAll(filepath.Dir(bin))
		}
	}
	os.Exit(code)
}

// built says whether a test built the bench's daemon.
var built atomic.Bool

// benchDaemonBuild builds the daemon the bench drives, once per test
// binary: prchat with -tags prchatbench, as make bench-build does.
var benchDaemonBuild = sync.OnceValues(func() (string, error) {
	built.Store(true)
	dir, err := os.MkdirTemp("", "prchat-benchd-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "prchat-benchd")
	out, err := exec.Command("go", "build", "-tags", "prchatbench", "-o", bin, "github.com/prchat/prchat/cmd/prchat").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build -tags prchatbench ./cmd/prchat: %v\n%s", err, out)
	}
	return bin, nil
})

// benchConfig is the bench's configuration of args, driving the daemon
// benchDaemonBuild built.
func benchConfig(t *testing.T, args ...string) Config {
	t.Helper()
	bin, err := benchDaemonBuild()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseArgs(append([]string{"--prchat", bin}, args...), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Settle = 500 * time.Millisecond
	return cfg
}

// TestBench runs the whole bench in a tiny configuration on the embedded
// default, its daemons started as prchat-bench starts them, and checks
// that every section is printed with figures. It asserts no timings: the
// machine running the tests decides those. It boots daemons for a minute,
// so it runs only when PRCHAT_TEST_BENCH=1 (as .ci/run does), not in
// `make test`; the bench's own package tests its parts.
func TestBench(t *testing.T) {
	if os.Getenv("PRCHAT_TEST_BENCH") != "1" {
		t.Skip("boots daemons for a minute; set PRCHAT_TEST_BENCH=1")
	}
	// The clis phase on the real CLIs when the tests have them (else it
	// is skipped, and said so).
	claudeBin, codexBin := os.Getenv("PRCHAT_TEST_CLAUDE_BIN"), os.Getenv("PRCHAT_TEST_CODEX_BIN")
	cfg := benchConfig(t, "--duration", "1s", "--clients", "8", "--turns", "10", "--subscribers", "10", "--running-turns", "10",
		"--cli-turns", "2", "--cli-hold", "2s", "--claude-bin", claudeBin, "--codex-bin", codexBin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, logs bytes.Buffer
	if err := Run(ctx, cfg, &out, &logs); err != nil {
		t.Fatalf("bench: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &logs)
	}
	// A figure: a number with its unit, or two ("p50 / p99"); never n/a.
	figure := regexp.MustCompile(`^\d+(\.\d+)?( ms| MB| KB| s)?( / \d+(\.\d+)? ms)?$`)
	for _, want := range []struct{ section, measure string }{
		{"memory P7", "idle serve RSS"},
		{"memory P7", "idle serve CPU"},
		{"memory P7", "peak serve RSS under load"},
		{"floor", "asks/s"},
		{"floor", "latency p50 / p99"},
		{"intake P1", "asks/s accepted"},
		{"intake P1", "ratio to the floor"},
		{"intake P1", "latency p50 / p99"},
		{"intake P1", "latency p50 / p99 at half the floor's rate"},
		{"overhead P2", "POST → done over SSE"},
		{"throughput P3", "turns/s settled, 1 serve"},
		{"events", "10 subscribers on 4 turns, 20 events/s asked: delivery p50 / p99"},
		{"events", "idle: serve RSS per subscriber"},
		{"running", "10 turns asked → all running on serve"},
		{"running", "RSS per running turn"},
		{"running", "CPU per running turn per second"},
		{"running", "delivery p50 / p99, serve to 10 subscribers on serve"},
		{"sessions", "upload 100 KB"},
		{"sessions", "upload 10 MB"},
		{"sessions", "store 1 MB"},
		{"sessions", "store 1 MB: CPU"},
		{"sessions", "store 10 MB: sealed"},
		{"sessions", "restore 1 MB"},
		{"sessions", "restore 1 MB: CPU"},
		{"sessions", "restore 10 MB"},
	} {
		value, ok := reportValue(out.String(), want.section, want.measure)
		switch {
		case !ok:
			t.Errorf("no %q line in section %q:\n%s", want.measure, want.section, &out)
		case !figure.MatchString(value):
			t.Errorf("%s %q: value %q is no figure", want.section, want.measure, value)
		}
	}
	for _, cli := range []struct{ backend, bin string }{{"claude-code", claudeBin}, {"codex", codexBin}} {
		if cli.bin == "" {
			continue
		}
		for _, measure := range []string{
			cli.backend + ": 2 turns at once, succeeded",
			"RSS per running turn (its CLI's process tree), mean / max",
			"CPU per running turn per second, waiting on the model",
			"CPU per turn, its CLI's whole run",
		} {
			if _, ok := reportValue(out.String(), "clis", measure); !ok {
				t.Errorf("no %q line in section clis:\n%s", measure, &out)
			}
		}
		if v, _ := reportValue(out.String(), "clis", cli.backend+": 2 turns at once, succeeded"); v != "2" {
			t.Errorf("clis: %s turns succeeded = %q, want 2:\n%s", cli.backend, v, &out)
		}
	}
	if strings.Contains(out.String(), "did not succeed") || strings.Contains(out.String(), "operations failed") {
		t.Errorf("the bench reports failures:\n%s", &out)
	}
	if v, _ := reportValue(out.String(), "running", "turns lost / answered twice"); v != "0 / 0 / 0" {
		t.Errorf("running: turns lost / answered twice / streams not ended with done = %q, want 0 / 0 / 0:\n%s", v, &out)
	}
}

// TestBenchRunning runs the running phase tiny on the test Postgres and
// Redis: a loaded worker, its heartbeat, its kill and the takeover of its
// turns by a spare worker, and checks that the figures are printed and no
// turn was lost or answered twice. It asserts no timings.
func TestBenchRunning(t *testing.T) {
	if os.Getenv("PRCHAT_TEST_BENCH") != "1" {
		t.Skip("boots daemons for half a minute; set PRCHAT_TEST_BENCH=1")
	}
	dbURL := os.Getenv(storetest.EnvDatabaseURL)
	if dbURL == "" || os.Getenv(workertest.EnvRedisURL) == "" {
		t.Skip("needs the test Postgres and Redis")
	}
	cfg := benchConfig(t, "--only", "running", "--duration", "1s", "--running-turns", "10",
		"--database-url", dbURL, "--redis-url", workertest.RedisURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, logs bytes.Buffer
	if err := Run(ctx, cfg, &out, &logs); err != nil {
		t.Fatalf("bench: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &logs)
	}
	figure := regexp.MustCompile(`^\d+(\.\d+)?( ms| KB| s)?( / \d+(\.\d+)? (ms|s))?$`)
	for _, measure := range []string{
		"10 turns asked → all running on worker-busy",
		"RSS per running turn",
		"CPU per running turn per second",
		"delivery p50 / p99, worker-busy to 10 subscribers on api",
		"heartbeat of worker-busy: gap between beats p50 / max",
		"takeover: SIGKILL → all 10 running on worker-spare or settled",
		"SIGKILL → all settled",
	} {
		value, ok := reportValue(out.String(), "running", measure)
		switch {
		case !ok:
			t.Errorf("no %q line:\n%s", measure, &out)
		case !figure.MatchString(value):
			t.Errorf("%q: value %q is no figure", measure, value)
		}
	}
	if v, _ := reportValue(out.String(), "running", "turns lost / answered twice"); v != "0 / 0 / 0" {
		t.Errorf("turns lost / answered twice / streams not ended with done = %q, want 0 / 0 / 0:\n%s", v, &out)
	}
}

// reportValue returns the value column of the report line of section
// whose measure starts with measure. Columns are two or more spaces apart.
func reportValue(report, section, measure string) (string, bool) {
	columns := regexp.MustCompile(`\s{2,}`)
	for _, l := range strings.Split(report, "\n") {
		f := columns.Split(strings.TrimSpace(l), -1)
		if len(f) >= 3 && f[0] == section && strings.HasPrefix(f[1], measure) {
			return f[2], true
		}
	}
	return "", false
}
