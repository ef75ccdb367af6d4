package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/cmd/prchat-bench/benchagent"
)

// parse parses args as prchat-bench does.
func parse(args ...string) (Config, error) { return parseArgs(args, io.Discard) }

func TestFlags(t *testing.T) {
	t.Parallel()
	def, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(allPhases(), def.Phases); diff != "" {
		t.Errorf("default phases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{100, 500, 2000, 10000}, def.Subscribers); diff != "" {
		t.Errorf("default subscribers (-want +got):\n%s", diff)
	}
	c, err := parse("--only", "events, intake,events", "--subscribers", "1,20")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"events", "intake"}, c.Phases); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 20}, c.Subscribers); diff != "" {
		t.Errorf("subscribers (-want +got):\n%s", diff)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--only", "speed"}, `unknown phase "speed"`},
		{[]string{"--only", ","}, "--only names no phase"},
		{[]string{"--subscribers", "0"}, `"0" is not a count`},
		{[]string{"--subscribers", ","}, "--subscribers names no count"},
		{[]string{"--clients", "0"}, "--clients must be between"},
		{[]string{"--duration", "1ms"}, "--duration must be between"},
		{[]string{"--turns", "0"}, "--turns must be between"},
		{[]string{"--concurrency", "1001"}, "--concurrency must be between"},
		{[]string{"--running-turns", "0"}, "--running-turns must be between"},
		{[]string{"--running-turns", "1001"}, "--running-turns must be between"},
		{[]string{"--reconciler-queued", "-1"}, "--reconciler-queued must be between"},
		{[]string{"--cli-turns", "0"}, "--cli-turns must be between"},
		{[]string{"--drain-rounds", "0"}, "--drain-rounds must be between"},
		{[]string{"--drain-rounds", "10"}, "--drain-rounds must be between"},
		{[]string{"--cli-hold", "10ms"}, "--cli-hold must be between"},
		{[]string{"--worker-gomaxprocs", "0"}, "--worker-gomaxprocs must be"},
		{[]string{"--worker-gomaxprocs", "half"}, "--worker-gomaxprocs must be"},
		{[]string{"--pgbouncer-url", "postgres://127.0.0.1:6432/db"}, "--pgbouncer-url needs --database-url"},
		{[]string{"--database-url", "postgres://127.0.0.1/db", "--pgbouncer-url", "127.0.0.1:6432"}, "is not a postgres:// URL"},
		{[]string{"--database-url", "postgres://127.0.0.1/db", "--pgbouncer-url", "postgres://127.0.0.1:6432/db?search_path=x"}, "must not set search_path"},
	} {
		if _, err := parse(bad.args...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want an error with %q", bad.args, err, bad.want)
		}
	}
	// Without events, no subscriber count is needed.
	if _, err := parse("--only", "intake", "--subscribers", ""); err != nil {
		t.Errorf("--only intake with no subscribers: %v", err)
	}
}

// TestRunRefusesAnIncompleteConfig: Run checks before it starts anything.
func TestRunRefusesAnIncompleteConfig(t *testing.T) {
	t.Parallel()
	c, err := parse("--cpuprofile", "cpu.out")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Command = nil }, "no command"},
		{func(c *Config) { c.Command, c.Clients = []string{"prchat"}, 0 }, "--clients"},
	} {
		c := c
		tc.change(&c)
		var out bytes.Buffer
		if err := Run(t.Context(), c, &out, &out); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run = %v, want an error with %q", err, tc.want)
		}
		if out.Len() > 0 {
			t.Errorf("Run printed %q before it refused", &out)
		}
	}
}

// TestRunLoadPaced: paced loops start an operation every pace, and an
// operation that starts late counts its wait in its latency.
func TestRunLoadPaced(t *testing.T) {
	t.Parallel()
	// At most one operation per pace: a loaded machine only runs fewer.
	quick := runLoad(t.Context(), 4, 0, 400*time.Millisecond, 20*time.Millisecond, func(context.Context) error { return nil })
	if quick.ops < 1 || quick.ops > 84 {
		t.Errorf("4 loops paced at 20ms ran %d operations in 400ms, want at most 80 (and some)", quick.ops)
	}
	// One loop whose operation takes 30ms, due every 10ms: each starts
	// later than the last, and its latency says so.
	slow := runLoad(t.Context(), 1, 0, 300*time.Millisecond, 10*time.Millisecond, func(context.Context) error {
		time.Sleep(30 * time.Millisecond)
		return nil
	})
	if n := len(slow.lat); n < 2 || slow.lat[n-1] < 100*time.Millisecond {
		t.Errorf("paced latencies of an operation slower than the pace = %v, want the last over 100ms", slow.lat)
	}
}

func TestPercentiles(t *testing.T) {
	t.Parallel()
	var d durations
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	s := d.sorted()
	if d[0] != 100*time.Millisecond {
		t.Error("sorted changed its receiver")
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.5, time.Millisecond}} {
		if got := s.percentile(tc.p); got != tc.want {
			t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := s.p50p99(); got != "50.0 ms / 99.0 ms" {
		t.Errorf("p50p99 = %q", got)
	}
	if got := durations(nil).p50p99(); got != "n/a" {
		t.Errorf("p50p99 of none = %q, want n/a", got)
	}
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{1234 * time.Microsecond, "1.23 ms"}, {12345 * time.Microsecond, "12.3 ms"}, {123456 * time.Microsecond, "123 ms"}} {
		if got := ms(tc.d); got != tc.want {
			t.Errorf("ms(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	r := loadResult{ops: 10, window: 2 * time.Second, lat: durations{3, 1}}.add(loadResult{ops: 30, errs: 1, window: 2 * time.Second, lat: durations{2}})
	if r.perSecond() != 10 || r.errs != 1 || cmp.Diff(durations{1, 2, 3}, r.lat) != "" {
		t.Errorf("merged load = %+v, want 10/s, 1 error, latencies 1 2 3", r)
	}
}

// TestReportOrdersSections: the table lists sections in a fixed order
// whatever order the phases added their rows in, then the notes.
func TestReportOrdersSections(t *testing.T) {
	t.Parallel()
	var r report
	r.add("events", "delivery", "1 ms", "", "")
	r.add("floor", "asks/s", "100", "", "")
	r.add("intake P1", "ratio", "0.90", "≥ 0.70", verdict(true))
	r.note("a note")
	var out bytes.Buffer
	r.print(&out)
	want := "" +
		"section    measure   value  goal    \n" +
		"floor      asks/s    100            \n" +
		"intake P1  ratio     0.90   ≥ 0.70  met\n" +
		"events     delivery  1 ms           \n" +
		"\nnotes:\n  - a note\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

// TestAgentDirectives: the agent answers at once, or emits the events its
// question asks for, each stamped with its send time; a resumed session
// keeps its id.
func TestAgentDirectives(t *testing.T) {
	t.Parallel()
	var a benchagent.Agent
	var events []chat.Event
	before := time.Now().UnixNano()
	res, err := a.Run(t.Context(), chat.RunRequest{Question: "events=3 interval=1ms hold=1ms"}, func(e chat.Event) { events = append(events, e) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != benchagent.Answer || res.SessionID == "" || res.Usage.Calls != 1 {
		t.Errorf("result = %+v", res)
	}
	if len(events) != 3 {
		t.Fatalf("%d events, want 3", len(events))
	}
	for _, e := range events {
		if ns, ok := summaryNanos([]byte(`{"type":"tool_result","summary":"` + e.Summary + `"}`)); !ok || ns < before {
			t.Errorf("event %+v carries no send time after the start", e)
		}
	}
	// start= schedules the events on the caller's clock: event i goes out
	// no sooner than start plus i intervals.
	start := time.Now().Add(20 * time.Millisecond)
	var sent []int64
	q := fmt.Sprintf("events=3 interval=10ms start=%d", start.UnixNano())
	if _, err := a.Run(t.Context(), chat.RunRequest{Question: q}, func(e chat.Event) {
		ns, _ := strconv.ParseInt(e.Summary, 10, 64)
		sent = append(sent, ns)
	}); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 3 {
		t.Fatalf("%d events with start=, want 3", len(sent))
	}
	for i, ns := range sent {
		if due := start.Add(time.Duration(i) * 10 * time.Millisecond).UnixNano(); ns < due {
			t.Errorf("event %d went out %s before its time", i, time.Duration(due-ns))
		}
	}
	again, err := a.Run(t.Context(), chat.RunRequest{Question: "q", Mode: chat.SessionResumed, Session: chat.SessionRef{ID: res.SessionID}}, func(chat.Event) {})
	if err != nil || again.SessionID != res.SessionID {
		t.Errorf("resumed run = %+v, %v; want session %s", again, err, res.SessionID)
	}
	if _, err := chat.ParseAnswer([]byte(benchagent.Answer), ""); err != nil {
		t.Errorf("Answer breaks the schema: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := a.Run(ctx, chat.RunRequest{Question: "hold=1h"}, func(chat.Event) {}); err == nil {
		t.Error("a cancelled run waited out its hold")
	}
}

// TestProcessFigures reads this process's RSS and CPU time.
func TestProcessFigures(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("read on Linux only")
	}
	t.Parallel()
	rss, err := processRSS(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Errorf("RSS = %d, %v; want over 1 MB", rss, err)
	}
	cpu0, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the CPU time grows: a loaded machine gives a spinning
	// goroutine less than a clock tick of a 100ms while.
	var cpu1 time.Duration
	chattest.Eventually(t, "this process's CPU time to grow while it spins", func() bool {
		for start := time.Now(); time.Since(start) < 10*time.Millisecond; {
		}
		cpu1, err = processCPU(os.Getpid())
		return err != nil || cpu1 > cpu0
	})
	if err != nil || cpu1 <= cpu0 {
		t.Errorf("CPU time %v then %v (%v), want it to grow while spinning", cpu0, cpu1, err)
	}
	if loadAverage() == "" {
		t.Error("no load average")
	}
	if _, err := processRSS(-1); err == nil {
		t.Error("RSS of no process: no error")
	}
}

// TestBeatLog: the beats are read off the heartbeat key's TTL, whenever the
// bench looked, and the key counts as gone only once the worker was killed.
func TestBeatLog(t *testing.T) {
	t.Parallel()
	l := &beatLog{done: make(chan struct{})}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	read := func(at, beat time.Duration) { l.add(t0.Add(at), heartbeatTTL-(at-beat)) }
	// Beats at 0, 3 and 7 s, read at irregular times, a little jitter.
	read(100*time.Millisecond, 0)
	read(1200*time.Millisecond, time.Millisecond)
	read(3050*time.Millisecond, 3*time.Second)
	read(6900*time.Millisecond, 3*time.Second-2*time.Millisecond)
	l.add(t0.Add(7*time.Second), -2) // a flush took it: not gone yet
	read(7100*time.Millisecond, 7*time.Second)
	gaps, least := l.gaps(t0, t0.Add(8*time.Second))
	if diff := cmp.Diff(durations{3 * time.Second, 4 * time.Second}, gaps); diff != "" {
		t.Errorf("gaps (-want +got):\n%s", diff)
	}
	if want := heartbeatTTL - 3902*time.Millisecond; least != want {
		t.Errorf("least TTL left %v, want %v", least, want)
	}
	if !l.gone.IsZero() {
		t.Error("a key gone before the kill counts as expired")
	}
	l.untilGone()
	l.add(t0.Add(16*time.Second), -2)
	if got := l.goneAt(); !got.Equal(t0.Add(16 * time.Second)) {
		t.Errorf("gone at %v, want 16s in", got)
	}
}

// TestRunningShape: the running phase's turns outlast its window, and the
// kill with a takeover.
func TestRunningShape(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{time.Second, 10 * time.Second} {
		alone := time.Duration(runningEvents(d, false)) * runningInterval
		taken := time.Duration(runningEvents(d, true)) * runningInterval
		if alone < d+5*time.Second || taken < 2*d+10*time.Second {
			t.Errorf("window %v: turns stream %v alone, %v with a takeover; too short", d, alone, taken)
		}
	}
	if runningHold(1000) > 30*time.Second || runningHold(200) < 2*time.Second {
		t.Errorf("hold %v for 1000 turns, %v for 200", runningHold(1000), runningHold(200))
	}
}

// TestSubscriberLatencies: the latencies are split at the kill; the events
// sent before the asks are left out.
func TestSubscriberLatencies(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := func(at, lat time.Duration) sentEvent { return sentEvent{sent: t0.Add(at), lat: lat} }
	s := &subscribers{events: [][]sentEvent{
		{ev(-time.Second, 9), ev(time.Second, 1), ev(5*time.Second, 5)},
		{ev(2*time.Second, 2), ev(6*time.Second, 6)},
	}}
	in, later := s.latencies(t0, t0.Add(5*time.Second), t0.Add(5*time.Second))
	if diff := cmp.Diff(durations{1, 2}, in); diff != "" {
		t.Errorf("before the kill (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(durations{5, 6}, later); diff != "" {
		t.Errorf("after the kill (-want +got):\n%s", diff)
	}
	s.finals, s.errs = []string{"done", "error"}, []error{nil, nil}
	if n, err := s.failed(); n != 1 || err == nil {
		t.Errorf("failed = %d, %v; want 1 with an error", n, err)
	}
}

// TestMainExitCodes: --help prints the usage to stdout and exits 0; a
// mistake in the command line exits 2 with one line, and starts nothing.
func TestMainExitCodes(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := Main(t.Context(), []string{"--help"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "Usage: prchat-bench") ||
		!strings.Contains(out.String(), "-subscribers") || !strings.Contains(out.String(), "-prchat") || errOut.Len() > 0 {
		t.Errorf("--help: exit %d, stdout %.60q, stderr %q; want 0 and the usage with its flags on stdout", code, &out, &errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--only", "speed"}, `prchat-bench: invalid value "speed" for flag -only: unknown phase "speed"`},
		{[]string{"--clients", "0"}, "prchat-bench: --clients must be between 1 and 4096 (see --help)"},
		{[]string{"extra"}, `prchat-bench: unexpected argument "extra" (see --help)`},
	} {
		out.Reset()
		errOut.Reset()
		code := Main(t.Context(), tc.args, &out, &errOut)
		if code != 2 || out.Len() > 0 || !strings.HasPrefix(errOut.String(), tc.want) || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("prchat-bench %s: exit %d, stdout %q, stderr %q; want 2 and one line %q", strings.Join(tc.args, " "), code, &out, &errOut, tc.want)
		}
	}
}

// TestMissingDaemonFails: a --prchat that is no program stops the bench
// with an error naming it, after it checked its settings.
func TestMissingDaemonFails(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	missing := filepath.Join(t.TempDir(), "no-prchat")
	code := Main(t.Context(), []string{"--prchat", missing, "--only", "overhead", "--turns", "1"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "no-prchat") {
		t.Errorf("exit %d, stderr %q; want 1 and an error naming %s", code, &errOut, missing)
	}
}

// TestWorkerProcs: "share" splits the machine's cores among the workers
// draining alone, at least one each; a number is every worker's; nothing
// leaves Go's own.
func TestWorkerProcs(t *testing.T) {
	t.Parallel()
	cores := runtime.NumCPU()
	for _, c := range []struct {
		flag string
		n    int
		want string
	}{
		{"", 8, ""},
		{"share", 1, strconv.Itoa(cores)},
		{"share", 2, strconv.Itoa(max(1, cores/2))},
		{"share", 8, strconv.Itoa(max(1, cores/8))},
		{"share", 4 * cores, "1"},
		{"3", 8, "3"},
	} {
		cfg, err := parse("--worker-gomaxprocs", c.flag)
		if err != nil {
			t.Fatalf("--worker-gomaxprocs %q: %v", c.flag, err)
		}
		if got := cfg.workerProcs(c.n); got != c.want {
			t.Errorf("--worker-gomaxprocs %q, %d workers: GOMAXPROCS %q, want %q", c.flag, c.n, got, c.want)
		}
	}
}
