package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBenchChild is no test of its own: it is the daemon under test of
// TestBench, which starts this test binary as `prchat serve|api|worker`.
func TestBenchChild(t *testing.T) {
	if os.Getenv("PRCHAT_BENCH_CHILD") != "1" {
		t.Skip("the daemon process of TestBench")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, flag.Args(), os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// TestBench runs the whole bench in a tiny configuration on the embedded
// default and checks that every section is printed with figures. It
// asserts no timings: the machine running the tests decides those.
func TestBench(t *testing.T) {
	if testing.Short() {
		t.Skip("starts daemon processes")
	}
	cfg, err := parseBenchArgs([]string{"--duration", "1s", "--clients", "8", "--turns", "10", "--subscribers", "10"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.command = []string{os.Args[0], "-test.run=^TestBenchChild$", "--"}
	cfg.childEnv = []string{"PRCHAT_BENCH_CHILD=1"}
	cfg.settle = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, logs bytes.Buffer
	if err := runBenchConfig(ctx, cfg, &out, &logs); err != nil {
		t.Fatalf("bench: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &logs)
	}
	// A figure: a number with its unit, or two ("p50 / p99"); never n/a.
	figure := regexp.MustCompile(`^\d+(\.\d+)?( ms| MB| KB)?( / \d+(\.\d+)? ms)?$`)
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
		{"events", "10 subscribers on 1 turn: delivery p50 / p99"},
		{"events", "10 subscribers: serve RSS per subscriber"},
	} {
		value, ok := reportValue(out.String(), want.section, want.measure)
		switch {
		case !ok:
			t.Errorf("no %q line in section %q:\n%s", want.measure, want.section, &out)
		case !figure.MatchString(value):
			t.Errorf("%s %q: value %q is no figure", want.section, want.measure, value)
		}
	}
	if strings.Contains(out.String(), "did not succeed") || strings.Contains(out.String(), "operations failed") {
		t.Errorf("the bench reports failures:\n%s", &out)
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

func TestBenchFlags(t *testing.T) {
	t.Parallel()
	cfg, err := parseBenchArgs([]string{"--only", "events, intake", "--subscribers", "1,20"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Phases, ","); got != "events,intake" {
		t.Errorf("phases = %s, want events,intake", got)
	}
	if len(cfg.Subscribers) != 2 || cfg.Subscribers[0] != 1 || cfg.Subscribers[1] != 20 {
		t.Errorf("subscribers = %v, want [1 20]", cfg.Subscribers)
	}
	for _, args := range [][]string{
		{"--only", "speed"},
		{"--only", ","},
		{"--subscribers", "0"},
		{"--clients", "0"},
		{"--duration", "1ms"},
		{"extra"},
	} {
		_, err := parseBenchArgs(args, io.Discard)
		var usage usageError
		if !errors.As(err, &usage) {
			t.Errorf("parseBenchArgs(%q) = %v, want a usage error", args, err)
		}
	}
}

// TestRunLoadPaced: paced loops start an operation every pace, and an
// operation that starts late counts its wait in its latency.
func TestRunLoadPaced(t *testing.T) {
	t.Parallel()
	quick := runLoad(t.Context(), 4, 0, 400*time.Millisecond, 20*time.Millisecond, func(context.Context) error { return nil })
	if quick.ops < 60 || quick.ops > 84 {
		t.Errorf("4 loops paced at 20ms ran %d operations in 400ms, want about 80", quick.ops)
	}
	// One loop whose operation takes 30ms, due every 10ms: each starts
	// later than the last, and its latency says so.
	slow := runLoad(t.Context(), 1, 0, 300*time.Millisecond, 10*time.Millisecond, func(context.Context) error {
		time.Sleep(30 * time.Millisecond)
		return nil
	})
	if n := len(slow.lat); n < 5 || slow.lat[n-1] < 100*time.Millisecond {
		t.Errorf("paced latencies of an operation slower than the pace = %v, want the last over 100ms", slow.lat)
	}
}
