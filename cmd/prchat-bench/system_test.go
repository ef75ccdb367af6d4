package main

import (
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/worker"
)

// TestRedisInfo reads the CPU time and the command counts of Redis INFO
// replies as Redis 7 writes them.
func TestRedisInfo(t *testing.T) {
	t.Parallel()
	cpu := "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:9.000000\r\n"
	if got := redisCPU(cpu); got != 3750*time.Millisecond {
		t.Errorf("redisCPU = %v, want 3.75s (sys + user, children left out)", got)
	}
	if got := redisCPU("# CPU\r\n"); got != -1 {
		t.Errorf("redisCPU of no figures = %v, want -1", got)
	}
	stats := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=40,usec=900,usec_per_call=22.50,rejected_calls=0,failed_calls=1\r\n" +
		"cmdstat_xadd:calls=70,usec=300,usec_per_call=4.29,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setname:calls=3,usec=3,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n"
	calls := redisCalls(stats)
	if diff := cmp.Diff(map[string]int64{"evalsha": 40, "xadd": 70, "client|setname": 3}, calls); diff != "" {
		t.Errorf("redisCalls (-want +got):\n%s", diff)
	}
	from := map[string]int64{"evalsha": 20, "xadd": 30}
	if got, want := commandsPerTurn(from, calls, 10, 2), "6.30: xadd 4.00, evalsha 2.00"; got != want {
		t.Errorf("commandsPerTurn = %q, want %q", got, want)
	}
	stmts := map[string]int64{"UPDATE turns SET state": 30, "SELECT 1": 5}
	if got, want := callsPerTurn(map[string]int64{"UPDATE turns SET state": 10}, stmts, 10, 1, func(q string) string { return "«" + q + "»" }, " "), "2.50: «UPDATE turns SET state» 2.00"; got != want {
		t.Errorf("callsPerTurn = %q, want %q", got, want)
	}
	if got := commandsPerTurn(nil, calls, 10, 2); got != "n/a" {
		t.Errorf("commandsPerTurn with no first count = %q, want n/a", got)
	}
	if got := perTurn(time.Second, 3*time.Second, 1000); got != "2.00 ms" {
		t.Errorf("perTurn = %q, want 2.00 ms", got)
	}
	if got := countPerTurn(-1, 5, 0, 1); got != "n/a" {
		t.Errorf("countPerTurn of an unknown count = %q, want n/a", got)
	}
	if got := countPerTurn(100, 330, 30, 100); got != "2.00" {
		t.Errorf("countPerTurn less the bench's own 30 = %q, want 2.00", got)
	}
}

// TestLoopbackURL tells a database on this machine from one elsewhere.
func TestLoopbackURL(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]bool{
		"postgres://postgres@127.0.0.1:5432/db":        true,
		"postgres://postgres@localhost/db":             true,
		"postgres://[::1]:5432/db":                     true,
		"postgres:///db?host=/var/run/postgresql":      true,
		"postgres://db.example.com:5432/db":            false,
		"postgres://10.0.0.5/db":                       false,
		"postgres://postgres@192.168.1.2/db?host=/tmp": false,
	} {
		if got := loopbackURL(url); got != want {
			t.Errorf("loopbackURL(%q) = %v, want %v", url, got, want)
		}
	}
}

// TestMachineAndProcessTree reads the machine's CPU and that of this
// process's tree, and refuses to take it for a Postgres server.
func TestMachineAndProcessTree(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("read on Linux only")
	}
	t.Parallel()
	busy0, all0 := machineCPU()
	own, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := processTreeCPU(os.Getpid())
	if err != nil || tree < own {
		t.Errorf("CPU of this process's tree = %v, %v; want at least its own %v", tree, err, own)
	}
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	busy1, all1 := machineCPU()
	if busy0 < 0 || busy1 <= busy0 || busy1-busy0 > all1-all0+10*time.Millisecond {
		t.Errorf("machine CPU busy %v → %v of %v → %v; want busy to grow while spinning, within all", busy0, busy1, all0, all1)
	}
	if _, err := postmasterOf(os.Getpid()); err == nil {
		t.Error("this test's parent was taken for a Postgres server")
	}
	if _, err := processTreeCPU(-1); err == nil {
		t.Error("CPU of no process: no error")
	}
}

// TestProcessSwitches reads a process's context switches over all its
// threads: a thread that sleeps again and again adds to what it slept.
func TestProcessSwitches(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("read on Linux only")
	}
	t.Parallel()
	before, after := make(chan switches, 1), make(chan switches, 1)
	errs := make(chan error, 2)
	go func() {
		// A goroutine locked to its thread parks that thread each time it
		// sleeps: one switch it makes itself per sleep, at least.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		s, err := processSwitches(os.Getpid())
		errs <- err
		before <- s
		for range 30 {
			time.Sleep(time.Millisecond)
		}
		s, err = processSwitches(os.Getpid())
		errs <- err
		after <- s
	}()
	from, until := <-before, <-after
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if !from.known() || until.slept-from.slept < 20 || until.preempted < from.preempted {
		t.Errorf("switches %+v → %+v over 30 sleeps of one thread; want at least 20 more slept, none fewer preempted", from, until)
	}
	if s, err := processSwitches(-1); err == nil || s.known() {
		t.Errorf("switches of no process = %+v, %v; want unknown and an error", s, err)
	}
	if !processNamed(os.Getpid(), "prchat-bench") || processNamed(os.Getpid(), "redis") {
		t.Errorf("processNamed of this test (%s) is wrong", os.Args[0])
	}
}

// TestSwitchesPerTurn: switches add up, count from an earlier reading,
// and are unknown once a part is.
func TestSwitchesPerTurn(t *testing.T) {
	t.Parallel()
	from := switches{slept: 100, preempted: 10}.plus(switches{slept: 50, preempted: 5})
	until := switches{slept: 400, preempted: 40}
	if got, want := switchesPerTurn(from, until, 100), "2.50 + 0.25"; got != want {
		t.Errorf("switchesPerTurn = %q, want %q", got, want)
	}
	// A process that exited took its count with it: no part below zero.
	if got, want := switchesPerTurn(until, from, 100), "0.00 + 0.00"; got != want {
		t.Errorf("switchesPerTurn of a smaller count = %q, want %q", got, want)
	}
	for _, c := range []struct{ from, until switches }{
		{unknownSwitches, until},
		{from, unknownSwitches},
		{from.plus(unknownSwitches), until},
	} {
		if got := switchesPerTurn(c.from, c.until, 100); got != "n/a" {
			t.Errorf("switchesPerTurn(%+v, %+v) = %q, want n/a", c.from, c.until, got)
		}
	}
	if got := switchesPerTurn(from, until, 0); got != "n/a" {
		t.Errorf("switchesPerTurn over no turn = %q, want n/a", got)
	}
}

// TestQueueFloor: the asynq floor handles tasks from a full backlog and
// leaves no queue of its own behind.
func TestQueueFloor(t *testing.T) {
	t.Parallel()
	e, err := worker.StartEmbeddedRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	rdb, err := e.Client(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	r, err := runQueueFloor(t.Context(), rdb, io.Discard, 2, 4, 50, 100*time.Millisecond, 400*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.tasks == 0 || r.window < 400*time.Millisecond || r.perSecond() <= 0 {
		t.Errorf("asynq floor handled %d tasks in %v, want some in at least 400ms", r.tasks, r.window)
	}
	queues, err := rdb.SMembers(t.Context(), "asynq:queues").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if q == queueFloorShared || q == queueFloorHost {
			t.Errorf("the floor left its queue %s behind", q)
		}
	}
	if keys, err := rdb.Keys(t.Context(), "asynq:{bench:*").Result(); err != nil || len(keys) > 0 {
		t.Errorf("the floor left keys %v behind (%v)", keys, err)
	}
}

// TestDescribePages reads the mode of transparent huge pages from the
// brackets the kernel puts it in, and says how many huge pages are
// reserved, of what size and how many are taken (in use or reserved by a
// mapping).
func TestDescribePages(t *testing.T) {
	t.Parallel()
	n := func(v uint64) *uint64 { return &v }
	for _, c := range []struct {
		thp                     string
		total, free, rsvd, size *uint64
		want                    string
	}{
		{"always [madvise] never\n", n(0), n(0), n(0), n(2048), "transparent huge pages madvise, no huge pages reserved"},
		// Postgres' shared memory: 64 pages reserved, 9 of them touched.
		{"[always] madvise never\n", n(100), n(91), n(64), n(2048), "transparent huge pages always, 100 huge pages reserved of 2048 kB (73 taken)"},
		{"", n(64), nil, nil, nil, "64 huge pages reserved"},
		{"always madvise never", nil, nil, nil, nil, ""},
		{"[]", nil, nil, nil, nil, ""},
	} {
		if got := describePages(c.thp, c.total, c.free, c.rsvd, c.size); got != c.want {
			t.Errorf("describePages(%q, …) = %q, want %q", c.thp, got, c.want)
		}
	}
	if runtime.GOOS == "linux" {
		if _, err := os.Stat("/proc/meminfo"); err == nil && !strings.Contains(memoryPages(), "huge pages") {
			t.Errorf("memoryPages() = %q, want the huge pages of /proc/meminfo", memoryPages())
		}
	}
}
