package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/cmd/prchat-bench/benchagent"
	"github.com/prchat/prchat/worker"
)

// drainCounts are the numbers of worker processes that drain a backlog
// alone (no api asking meanwhile), and that the reconciler is measured
// with.
var drainCounts = []int{1, 2, 4, 8}

// flatWithin is how far the operations per turn of n workers alone may
// stray from one worker's: more processes must not cost more per turn.
const flatWithin = 0.10

// drainOps is what a drain by n workers alone cost per turn settled, in
// operations, which do not depend on the machine's load (where turns/s
// does).
type drainOps struct {
	redis  float64 // Redis commands (a script's own calls counted)
	xacts  float64 // Postgres transactions, not the bench's own; -1 unknown
	writes float64 // Postgres transactions that wrote (ids assigned, exact); -1 unknown
	stmts  float64 // Postgres statements (pg_stat_statements), the same; -1 unknown
	blocks float64 // Postgres buffer accesses of the daemons' schema; -1 unknown
	// syncs is the server's flushes of its write-ahead log to disk (every
	// database's); -1 unknown.
	syncs float64
	// blockCPU is the CPU the daemons' Postgres backends used per buffer
	// access, in microseconds; -1 unknown.
	blockCPU float64
	// switches is the context switches of the workers, their Postgres
	// backends and Redis; -1 unknown.
	switches float64
}

// drainTotal sums the operations of the drains by n workers alone over
// the rounds: a count is -1 once a round could not read it.
type drainTotal struct {
	turns, redis, xacts, writes, stmts, blocks, syncs int64
	backends                                          time.Duration // the daemons' Postgres backends' CPU
	// switched is the context switches of the workers, their backends
	// and Redis.
	switched switches
}

// noteDrainOps adds the operations of a drain by n workers alone between
// two samples, in which turns settled, to the totals of n workers.
func (b *bencher) noteDrainOps(n int, from, until usage, turns int64) {
	if turns <= 0 || from.redisCalls == nil || until.redisCalls == nil {
		return
	}
	if b.perf.drainTotals == nil {
		b.perf.drainTotals = map[int]*drainTotal{}
	}
	t := b.perf.drainTotals[n]
	if t == nil {
		t = &drainTotal{}
		b.perf.drainTotals[n] = t
	}
	own := until.own - from.own
	add := func(sum *int64, from, until, own int64) {
		if *sum < 0 || from < 0 || until < 0 {
			*sum = -1
			return
		}
		*sum += max(until-from-own, 0)
	}
	t.turns += turns
	t.redis += callsBetween(from.redisCalls, until.redisCalls)
	add(&t.xacts, from.pgXacts, until.pgXacts, own)
	add(&t.writes, from.pgXids, until.pgXids, 0)
	add(&t.stmts, from.pgStmts, until.pgStmts, own)
	add(&t.blocks, from.pgBlocks, until.pgBlocks, 0)
	add(&t.syncs, from.pgSyncs, until.pgSyncs, 0)
	if t.backends >= 0 && from.pgBackends >= 0 && until.pgBackends >= 0 {
		t.backends += max(until.pgBackends-from.pgBackends, 0)
	} else {
		t.backends = -1
	}
	t.switched = t.switched.plus(until.daemonSwitches.since(from.daemonSwitches)).
		plus(until.pgSwitches.since(from.pgSwitches)).
		plus(until.redisSwitches.since(from.redisSwitches))
}

// ops is t per turn.
func (t *drainTotal) ops() drainOps {
	per := func(n int64) float64 {
		if n < 0 {
			return -1
		}
		return float64(n) / float64(t.turns)
	}
	o := drainOps{redis: per(t.redis), xacts: per(t.xacts), writes: per(t.writes), stmts: per(t.stmts), blocks: per(t.blocks), syncs: per(t.syncs), blockCPU: -1,
		switches: per(t.switched.slept + t.switched.preempted)}
	if !t.switched.known() {
		o.switches = -1
	}
	if t.blocks > 0 && t.backends >= 0 {
		o.blockCPU = float64(t.backends.Microseconds()) / float64(t.blocks)
	}
	return o
}

// callsBetween is the Redis calls between two counts, all commands.
func callsBetween(from, until map[string]int64) int64 {
	var sum int64
	for _, d := range callDeltas(from, until) {
		sum += d
	}
	return sum
}

// callDeltas is the calls of each name between two counts by name, the
// names whose count grew.
func callDeltas(from, until map[string]int64) map[string]int64 {
	delta := map[string]int64{}
	for name, n := range until {
		if d := n - from[name]; d > 0 {
			delta[name] = d
		}
	}
	return delta
}

// addDrainFlatness adds the rows that compare the operations per turn of
// 1, 2, 4 and 8 workers alone (the goal: within flatWithin of one
// worker's).
func (b *bencher) addDrainFlatness() {
	ops := map[int]drainOps{}
	for n, t := range b.perf.drainTotals {
		ops[n] = t.ops()
	}
	one, ok := ops[1]
	if !ok {
		return
	}
	for _, kind := range []struct {
		name string
		get  func(drainOps) float64
	}{
		{"Redis commands", func(o drainOps) float64 { return o.redis }},
		{"Postgres statements", func(o drainOps) float64 { return o.stmts }},
		{"Postgres transactions", func(o drainOps) float64 { return o.xacts }},
		{"Postgres transactions that wrote", func(o drainOps) float64 { return o.writes }},
	} {
		value, worst, ok := flatness(drainCounts, ops, kind.get(one), kind.get)
		if !ok {
			continue
		}
		b.rep.add("throughput P3", fmt.Sprintf("%s per turn, %s workers alone (largest change from 1)", kind.name, countsLabel(drainCounts)),
			value+fmt.Sprintf(" (%+.0f%%)", 100*worst), fmt.Sprintf("within %.0f%%", 100*flatWithin), verdict(worst <= flatWithin && worst >= -flatWithin))
	}
	// What else is shown side by side, with no goal: the work is the same
	// with more processes, each piece of it dearer when they share the
	// cores. label has %s for the counts of workers.
	for _, row := range []struct {
		label string
		get   func(drainOps) float64
	}{
		// What the server did per turn.
		{"Postgres buffer accesses per turn, %s workers alone (largest change from 1)", func(o drainOps) float64 { return o.blocks }},
		// The flushes of the write-ahead log are what a commit that must
		// reach the disk waits for: batches of a process's statements
		// make fewer transactions per turn for one process than for
		// eight, but not more flushes, since concurrent commits share
		// them.
		{"Postgres WAL flushes per turn, %s workers alone (largest change from 1)", func(o drainOps) float64 { return o.syncs }},
		// What each buffer access cost in CPU.
		{"… the daemons' backends' CPU per access, µs, %s workers alone", func(o drainOps) float64 { return o.blockCPU }},
		// Who switches: more processes than cores make each turn switch
		// more.
		{"context switches per turn of the workers, their backends and Redis, %s workers alone", func(o drainOps) float64 { return o.switches }},
	} {
		if value, worst, ok := flatness(drainCounts, ops, row.get(one), row.get); ok {
			b.rep.add("throughput P3", fmt.Sprintf(row.label, countsLabel(drainCounts)), value+fmt.Sprintf(" (%+.0f%%)", 100*worst), "", "")
		}
	}
	b.rep.note(fmt.Sprintf("throughput (workers alone): operations per turn do not depend on the machine's load; turns/s do (load average %s at the end). The operations are summed over the rounds. Postgres counts its statements as they end, but a backend reports its transactions up to a second late, so the transactions of a short window are the less exact figure; the transactions that wrote are counted exactly, by the transaction ids the server assigned (server-wide: another client writing to the same server meanwhile would count). The buffer accesses are those of the daemons' schema (pg_statio_all_tables: tables, indexes, TOAST), reported as late as the transactions, the bench's own few reads of it included", loadAverage()))
}

// flatness formats the figure of each count of workers, and returns the
// change from one worker's (base) that is largest in size; ok is false
// if a count's figure is missing.
func flatness(counts []int, ops map[int]drainOps, base float64, get func(drainOps) float64) (value string, worst float64, ok bool) {
	if base <= 0 {
		return "", 0, false
	}
	parts := make([]string, 0, len(counts))
	for _, n := range counts {
		o, found := ops[n]
		if !found || get(o) < 0 {
			return "", 0, false
		}
		v := get(o)
		parts = append(parts, fmt.Sprintf("%.2f", v))
		if d := v/base - 1; d*d > worst*worst {
			worst = d
		}
	}
	return strings.Join(parts, " / "), worst, true
}

// countsLabel is "1 / 2 / 4 / 8".
func countsLabel(counts []int) string {
	s := make([]string, len(counts))
	for i, n := range counts {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, " / ")
}

// The reconciler's measure: turns queued on the host queue of a worker that
// is alive (the bench beats for it) but that never runs, so that they stay
// queued while the workers under test pass over them.
const (
	parkedHost = "bench-parked"
	// reconcilerPasses is how many passes of the reconciler (every 5s) the
	// window holds.
	reconcilerPasses = 2
	reconcilerEvery  = 5 * time.Second
)

// reconcilerScale measures what the deployment's reconciler costs per
// pending turn and pass, with cfg.ReconcilerQueued turns queued, for each
// count of drainCounts workers (started with start; stopAll stops them):
// the Redis commands and the Postgres statements of every process over a
// window of reconcilerPasses passes with the turns queued, less those of
// the same workers over the same window with nothing queued (their
// heartbeats, idle polls and lease tries), over queued turns × passes.
// The turns are asked on a review whose session lives on parkedHost, a
// worker the bench keeps alive with a heartbeat of its own and that runs
// nothing, so they stay queued on its host queue; they are cancelled
// before the idle windows.
func (b *bencher) reconcilerScale(ctx context.Context, api *benchDaemon, start func(int) error, stopAll func()) error {
	queued := int64(b.cfg.ReconcilerQueued)
	if queued <= 0 {
		return nil
	}
	stopAll()
	hb, err := worker.NewHeartbeat(b.rdb, worker.HeartbeatConfig{Identity: worker.NewIdentity(parkedHost)})
	if err != nil {
		return err
	}
	if err := hb.Start(ctx); err != nil {
		return err
	}
	defer hb.Stop()
	if err := b.postJSON(ctx, api.url+"/api/v1/repos/bench/repo/pulls/2/reviews", map[string]string{
		"head_sha": b.head, "backend": benchagent.Backend, "session_id": "bench-parked", "session_host": parkedHost,
		"run_dir": b.repoDir, "markdown": "A review whose session is on a worker that runs nothing.",
	}, http.StatusCreated); err != nil {
		return fmt.Errorf("reconciler: record the parked review: %w", err)
	}
	convs, err := b.askParked(ctx, api, queued)
	cancelled := false
	defer func() {
		if cancelled {
			return
		}
		if err := b.cancelAll(context.WithoutCancel(ctx), api, convs); err != nil {
			b.rep.note("reconciler: cancel the parked turns: " + err.Error())
		}
	}()
	if err != nil {
		return fmt.Errorf("reconciler: ask %d turns: %w", queued, err)
	}
	pending, err := b.pending(ctx)
	if err != nil {
		return err
	}
	busy := map[int]passOps{}
	for _, n := range drainCounts {
		if busy[n], err = b.reconcilerWindow(ctx, n, start, stopAll); err != nil {
			return err
		}
		// The parked turns must stay queued: a pass that moved them (their
		// host taken for dead) and a worker that ran them would make the
		// window's commands those of runs, not of a pass.
		left, err := b.pending(ctx)
		if err != nil {
			return err
		}
		if left != pending {
			b.rep.note(fmt.Sprintf("reconciler (%d workers): %d of the %d parked turns left the queue during the window (run or settled): its figures, and those after it, are not those of passes over queued turns",
				n, pending-left, pending))
		}
	}
	cancelled = true
	if err := b.cancelAll(ctx, api, convs); err != nil {
		return fmt.Errorf("reconciler: cancel the parked turns: %w", err)
	}
	for _, n := range drainCounts {
		idle, err := b.reconcilerWindow(ctx, n, start, stopAll)
		if err != nil {
			return err
		}
		per := float64(pending) * reconcilerPasses
		redis, pg := "n/a", "n/a"
		if q := busy[n]; q.redis >= 0 && idle.redis >= 0 {
			redis = fmt.Sprintf("%.4f (%d commands a pass queued, %d idle)", float64(q.redis-idle.redis)/per, q.redis/reconcilerPasses, idle.redis/reconcilerPasses)
		}
		if q := busy[n]; q.pg >= 0 && idle.pg >= 0 {
			pg = fmt.Sprintf("%.5f", float64(q.pg-idle.pg)/per)
		}
		label := fmt.Sprintf("%d workers", n)
		if n == 1 {
			label = "1 worker"
		}
		b.rep.add("throughput P3", fmt.Sprintf("reconciler, %s, %d turns queued: Redis commands / Postgres statements per pending turn and pass", label, pending),
			redis+" / "+pg, "", "")
		if q := busy[n]; q.calls != nil && idle.calls != nil && float64(q.redis-idle.redis)/per > 0.1 {
			// far more than a pass's own reads (a few per pass): say which commands
			b.rep.note(fmt.Sprintf("reconciler (%s): Redis commands per pending turn and pass above idle, the most called: %s",
				label, callsPerTurn(idle.calls, q.calls, int64(per), 5, strings.ToLower, ", ")))
		}
	}
	b.rep.note(fmt.Sprintf("reconciler: the commands and statements of the workers over %d passes (%s) with the turns queued, less the same workers' over as long with none (heartbeats, idle polls, lease tries); the turns wait on the host queue of a worker the bench keeps alive and that runs nothing; load average %s",
		reconcilerPasses, reconcilerPasses*reconcilerEvery, loadAverage()))
	return nil
}

// passOps are the Redis commands and Postgres statements (not the
// bench's) of a window of reconcilerPasses passes; -1 unknown.
type passOps struct {
	redis, pg int64
	calls     map[string]int64 // Redis calls by command in the window; nil unknown
}

// reconcilerWindow starts n workers, lets the first of them take the
// lease and pass once, and counts what a window of reconcilerPasses passes
// costs; the workers are stopped after.
func (b *bencher) reconcilerWindow(ctx context.Context, n int, start func(int) error, stopAll func()) (passOps, error) {
	stopAll()
	defer stopAll()
	if err := start(n); err != nil {
		return passOps{}, err
	}
	if err := chat.Sleep(ctx, reconcilerEvery+time.Second); err != nil {
		return passOps{}, err
	}
	from := b.sample(ctx)
	if err := chat.Sleep(ctx, reconcilerPasses*reconcilerEvery); err != nil {
		return passOps{}, err
	}
	until := b.sample(ctx)
	ops := passOps{redis: -1, pg: -1}
	if from.redisCalls != nil && until.redisCalls != nil {
		ops.calls = callDeltas(from.redisCalls, until.redisCalls)
		ops.redis = callsBetween(nil, ops.calls)
	}
	if b.perf.pgStatements != "" && from.pgStmts >= 0 && until.pgStmts >= 0 {
		ops.pg = max(until.pgStmts-from.pgStmts-(until.own-from.own), 0)
	}
	return ops, nil
}

// askParked asks count questions on the parked review with the bench's
// clients and returns their conversations.
func (b *bencher) askParked(ctx context.Context, api *benchDaemon, count int64) ([]string, error) {
	path := b.askPath
	b.askPath = "/api/v1/repos/bench/repo/pulls/2/reviews/1/conversations"
	defer func() { b.askPath = path }()
	body := askBody(benchQuestion)
	var left atomic.Int64
	left.Store(count)
	var mu sync.Mutex
	var convs []string
	var first error
	var wg sync.WaitGroup
	for range b.cfg.Clients {
		wg.Go(func() {
			for left.Add(-1) >= 0 && ctx.Err() == nil {
				id, err := b.ask(ctx, api.url, body, true)
				mu.Lock()
				if err != nil {
					first = cmpErr(first, err)
					mu.Unlock()
					return
				}
				convs = append(convs, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return convs, first
	}
	return convs, ctx.Err()
}

// cancelAll cancels the first turn of each conversation.
func (b *bencher) cancelAll(ctx context.Context, api *benchDaemon, convs []string) error {
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range b.cfg.Clients {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(convs)); i = next.Add(1) - 1 {
				err := b.postJSON(ctx, api.url+"/api/v1/conversations/"+convs[i]+"/turns/1/cancel", map[string]string{}, http.StatusAccepted, http.StatusConflict)
				if err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	_, _, err := b.drain(ctx, b.drainLimit())
	return err
}

// cmpErr returns the first of two errors that is set.
func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
