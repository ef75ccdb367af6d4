package main

import (
	"math"
	"testing"
	"time"
)

// TestFlatness finds the change from one worker's figure largest in size,
// either way, and refuses to compare with a figure missing.
func TestFlatness(t *testing.T) {
	t.Parallel()
	ops := map[int]drainOps{
		1: {redis: 24, xacts: 2},
		2: {redis: 24.5, xacts: 1.9},
		4: {redis: 25, xacts: 2.05},
		8: {redis: 27, xacts: 1.7},
	}
	redis := func(o drainOps) float64 { return o.redis }
	value, worst, ok := flatness(drainCounts, ops, ops[1].redis, redis)
	if !ok || value != "24.00 / 24.50 / 25.00 / 27.00" || math.Abs(worst-0.125) > 1e-9 {
		t.Errorf("redis: %q, %v, %v; want the four figures and +12.5%%", value, worst, ok)
	}
	xacts := func(o drainOps) float64 { return o.xacts }
	if _, worst, ok := flatness(drainCounts, ops, ops[1].xacts, xacts); !ok || math.Abs(worst+0.15) > 1e-9 {
		t.Errorf("xacts: %v, %v; want -15%%", worst, ok)
	}
	delete(ops, 4)
	if _, _, ok := flatness(drainCounts, ops, 24, redis); ok {
		t.Error("compared with the figure of 4 workers missing")
	}
	ops[4] = drainOps{redis: 25, xacts: -1}
	if _, _, ok := flatness(drainCounts, ops, 2, xacts); ok {
		t.Error("compared with an unknown count of transactions")
	}
}

// TestDrainOrder: over as many rounds as counts, each count of workers
// drains once in each place, so a slow stretch of the machine does not fall
// on one count alone.
func TestDrainOrder(t *testing.T) {
	t.Parallel()
	place := map[[2]int]int{} // count, place → rounds
	for r := range len(drainCounts) {
		order := drainOrder(r)
		if len(order) != len(drainCounts) {
			t.Fatalf("round %d: %v, want every count once", r, order)
		}
		for i, n := range order {
			place[[2]int{n, i}]++
		}
	}
	for _, n := range drainCounts {
		for i := range drainCounts {
			if got := place[[2]int{n, i}]; got != 1 {
				t.Errorf("%d workers drained %d times in place %d, want once", n, got, i)
			}
		}
	}
	if got := drainOrder(0); got[0] != drainCounts[0] {
		t.Errorf("round 1 starts with %d workers, want %d", got[0], drainCounts[0])
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	vs := []float64{700, 500, 900}
	for _, c := range []struct {
		vs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {vs, 700}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.vs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.vs, got, c.want)
		}
	}
	if vs[0] != 700 || vs[1] != 500 {
		t.Errorf("median sorted its argument: %v", vs)
	}
}

// TestDrainTotals sums the operations of the rounds per turn, and a count
// one round could not read stays unknown however the others went.
func TestDrainTotals(t *testing.T) {
	t.Parallel()
	b := &bencher{}
	at := func(redis, xacts, xids, stmts, own, blocks int64, backends time.Duration) usage {
		return usage{redisCalls: map[string]int64{"evalsha": redis}, pgXacts: xacts, pgXids: xids, pgStmts: stmts, own: own, pgBlocks: blocks, pgBackends: backends, pgSyncs: blocks / 100}
	}
	// Round 1: 100 turns, 2,400 Redis calls, 210 transactions of which 10
	// the bench's own, 150 that wrote, 900 statements (10 own), 3,000
	// buffer accesses, 30 flushes of the WAL, 30 ms of the backends' CPU.
	b.noteDrainOps(2, at(0, 1000, 5000, 0, 0, 500, time.Second), at(2400, 1210, 5150, 910, 10, 3500, time.Second+30*time.Millisecond), 100)
	// Round 2: 300 turns; the statements could not be read; 9,000 buffer
	// accesses, 90 flushes, 150 ms.
	b.noteDrainOps(2, at(5000, 2000, 6000, 100, 10, 4000, 2*time.Second), at(12000, 2600, 6450, -1, 10, 13000, 2*time.Second+150*time.Millisecond), 300)
	// No turn settled: nothing is added.
	b.noteDrainOps(2, at(0, 0, 0, 0, 0, 0, 0), at(99, 99, 99, 99, 0, 99, time.Second), 0)
	got := b.perf.drainTotals[2].ops()
	want := drainOps{redis: 9400.0 / 400, xacts: 800.0 / 400, writes: 600.0 / 400, stmts: -1, blocks: 12000.0 / 400, syncs: 120.0 / 400, blockCPU: 180000.0 / 12000}
	if got != want {
		t.Errorf("ops = %+v, want %+v", got, want)
	}
	// 4 workers: one round could not read the backends' CPU, so their CPU
	// per access is unknown while the accesses still add up.
	b.noteDrainOps(4, at(0, 0, 0, 0, 0, 0, time.Second), at(10, 10, 10, 10, 0, 800, 2*time.Second), 10)
	b.noteDrainOps(4, at(0, 0, 0, 0, 0, 0, -1), at(10, 10, 10, 10, 0, 200, time.Second), 10)
	if got := b.perf.drainTotals[4].ops(); got.blocks != 50 || got.blockCPU != -1 {
		t.Errorf("4 workers: blocks %v, CPU per access %v; want 50 and -1 (unknown)", got.blocks, got.blockCPU)
	}
}

// TestDrainSwitches: the context switches of the workers, their backends
// and Redis add up over the rounds, and are unknown once a round could
// not read one of them.
func TestDrainSwitches(t *testing.T) {
	t.Parallel()
	b := &bencher{}
	at := func(workers, backends, redis switches) usage {
		return usage{redisCalls: map[string]int64{}, daemonSwitches: workers, pgSwitches: backends, redisSwitches: redis}
	}
	sw := func(slept, preempted int64) switches { return switches{slept: slept, preempted: preempted} }
	// Round 1, 100 turns: workers 500 + 200, backends 100 + 50, Redis 100 + 50.
	b.noteDrainOps(8, at(sw(1000, 100), sw(10, 0), sw(7, 7)), at(sw(1500, 300), sw(110, 50), sw(107, 57)), 100)
	// Round 2, 300 turns: workers 900 + 300 (a thread exited: the
	// preempted count fell, and counts as none), backends 300 + 100,
	// Redis 200 + 0.
	b.noteDrainOps(8, at(sw(0, 400), sw(0, 0), sw(0, 0)), at(sw(900, 300), sw(300, 100), sw(200, 0)), 300)
	if got, want := b.perf.drainTotals[8].ops().switches, (700.0+150+150+900+400+200)/400; got != want {
		t.Errorf("switches per turn = %v, want %v", got, want)
	}
	// A round whose Redis could not be read leaves the total unknown.
	b.noteDrainOps(1, at(sw(0, 0), sw(0, 0), unknownSwitches), at(sw(10, 10), sw(10, 10), sw(10, 10)), 10)
	b.noteDrainOps(1, at(sw(0, 0), sw(0, 0), sw(0, 0)), at(sw(10, 10), sw(10, 10), sw(10, 10)), 10)
	if got := b.perf.drainTotals[1].ops().switches; got != -1 {
		t.Errorf("switches per turn with a round unread = %v, want -1", got)
	}
}
