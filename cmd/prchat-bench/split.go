package main

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prchat/prchat/chat"
)

// workerCounts are the numbers of worker processes of the split
// topologies the throughput phase measures.
var workerCounts = []int{1, 2, 4}

// oneWorker is the label of the split topology with one worker.
const oneWorker = "api + 1 worker"

// workersLabel is the label of the split topology with n workers.
func workersLabel(n int) string {
	if n == 1 {
		return oneWorker
	}
	return fmt.Sprintf("api + %d workers", n)
}

// splitThroughput measures the throughput of the api with 1, 2 and 4
// workers (w1 and workers it starts), then the workers alone: 1, 2, 4 and
// 8 of them draining a backlog asked while no worker ran, with no asks
// meanwhile, then the reconciler over many queued turns. It returns the worker that runs when it is done, for the
// phases after it, in place of w1.
func (b *bencher) splitThroughput(ctx context.Context, api, w1 *benchDaemon) (*benchDaemon, error) {
	workers := []*benchDaemon{w1}
	stopAll := func() {
		for _, w := range workers {
			b.stopDaemon(w)
		}
		workers = nil
	}
	startUpTo := func(n int) error {
		for len(workers) < n {
			w, err := b.startDaemon(ctx, "worker", fmt.Sprintf("worker-%d", len(workers)+1))
			if err != nil {
				return err
			}
			workers = append(workers, w)
		}
		return nil
	}
	for _, n := range workerCounts {
		if err := startUpTo(n); err != nil {
			stopAll()
			return nil, err
		}
		if err := b.throughput(ctx, workersLabel(n), api, append([]*benchDaemon{api}, workers...)); err != nil {
			stopAll()
			return nil, err
		}
	}
	for _, n := range drainCounts {
		stopAll()
		if err := b.drainAlone(ctx, api, n, startUpTo, &workers); err != nil {
			stopAll()
			return nil, err
		}
	}
	b.addDrainFlatness()
	if err := b.reconcilerScale(ctx, api, startUpTo, stopAll); err != nil {
		stopAll()
		return nil, err
	}
	if err := startUpTo(1); err != nil {
		return nil, err
	}
	for _, w := range workers[1:] {
		b.stopDaemon(w)
	}
	return workers[0], nil
}

// drainAlone asks a backlog of turns while no worker runs, then starts n
// workers (with start, which appends them to *workers) and measures how
// fast they work it off, with nothing asked meanwhile: the workers' own
// throughput, without the api and the bench's clients taking a share of the
// cores.
func (b *bencher) drainAlone(ctx context.Context, api *benchDaemon, n int, start func(int) error, workers *[]*benchDaemon) error {
	label := fmt.Sprintf("%d workers alone", n)
	if n == 1 {
		label = "1 worker alone"
	}
	warm, dur := warmup(b.cfg.Duration), b.cfg.Duration
	// Enough for the window at the rate the api and n workers reached, with
	// a margin for the workers' start.
	// (8 workers: at the rate of the most the api had.)
	drainRate := cmp.Or(b.perf.turnsPerSecond[workersLabel(n)], b.perf.turnsPerSecond[workersLabel(workerCounts[len(workerCounts)-1])])
	backlog := int64(2.5 * drainRate * (warm + dur + 2*time.Second).Seconds())
	backlog = min(max(backlog, 1500), 100_000)
	if err := b.askBacklog(ctx, api, backlog); err != nil {
		return fmt.Errorf("%s: ask the backlog: %w", label, err)
	}
	before, err := b.settled(ctx)
	if err != nil {
		return err
	}
	if err := start(n); err != nil {
		return err
	}
	if err := chat.Sleep(ctx, warm); err != nil {
		return err
	}
	ws := *workers
	tFrom, cpuFrom, useFrom := time.Now(), cpuTimes(ws, (*benchDaemon).cpu), b.sample(ctx)
	atFrom, err := b.settled(ctx)
	if err != nil {
		return err
	}
	ranOut := false
	for time.Since(tFrom) < dur {
		p, err := b.pending(ctx)
		if err != nil {
			return err
		}
		if p == 0 {
			ranOut = true
			break
		}
		if err := chat.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	tUntil, cpuUntil, useUntil := time.Now(), cpuTimes(ws, (*benchDaemon).cpu), b.sample(ctx)
	atUntil, err := b.settled(ctx)
	if err != nil {
		return err
	}
	if _, _, err := b.drain(ctx, b.drainLimit()); err != nil {
		return fmt.Errorf("%s: wait for the backlog: %w", label, err)
	}
	after, err := b.settled(ctx)
	if err != nil {
		return err
	}
	b.checkFailures(ctx, "throughput ("+label+")", before, after)

	turns := total(atUntil) - total(atFrom)
	tps := float64(turns) / tUntil.Sub(tFrom).Seconds()
	b.rep.add("throughput P3", fmt.Sprintf("turns/s settled, %s, draining %d turns asked before they started", label, backlog), rate(tps), "", "")
	if one := b.perf.turnsPerSecond["1 worker alone"]; n > 1 && one > 0 {
		b.rep.add("throughput P3", fmt.Sprintf("  ratio to 1 worker alone (linear: %d)", n), fmt.Sprintf("%.2f", tps/one), "", "")
	}
	if b.perf.turnsPerSecond == nil {
		b.perf.turnsPerSecond = map[string]float64{}
	}
	b.perf.turnsPerSecond[label] = tps
	b.addDaemonCPU("throughput P3", "  CPU per turn (run), ", ws, cpuFrom, cpuUntil, turns)
	b.addUsage("throughput P3", "turn", useFrom, useUntil, turns, daemonCPU(cpuFrom, cpuUntil))
	b.noteDrainOps(n, useFrom, useUntil, turns)
	b.noteStatements(label, useFrom, useUntil, turns)
	if ranOut {
		b.rep.note(fmt.Sprintf("throughput (%s): the backlog ran out %s into the %s window; the rate is over what was left", label, tUntil.Sub(tFrom).Round(time.Millisecond), dur))
	}
	return nil
}

// askBacklog asks count turns through the api with the bench's clients, as
// fast as it takes them.
func (b *bencher) askBacklog(ctx context.Context, api *benchDaemon, count int64) error {
	body := askBody(benchQuestion)
	var left atomic.Int64
	left.Store(count)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range b.cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 && ctx.Err() == nil {
				if _, err := b.ask(ctx, api.url, body, false); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
