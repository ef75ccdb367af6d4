package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
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
// meanwhile (cfg.DrainRounds rounds), then the reconciler over many queued
// turns. It returns the worker that runs when it is done, for the
// phases after it, in place of w1.
func (b *bencher) splitThroughput(ctx context.Context, api, w1 *benchDaemon) (*benchDaemon, error) {
	workers := []*benchDaemon{w1}
	stopAll := func() {
		for _, w := range workers {
			b.stopDaemon(w)
		}
		workers = nil
	}
	startUpToWith := func(n int, settings map[string]string) error {
		for len(workers) < n {
			w, err := b.startDaemonWith(ctx, "worker", fmt.Sprintf("worker-%d", len(workers)+1), settings)
			if err != nil {
				return err
			}
			workers = append(workers, w)
		}
		return nil
	}
	startUpTo := func(n int) error { return startUpToWith(n, nil) }
	// The workers alone, each with the GOMAXPROCS --worker-gomaxprocs
	// gives n of them (they are all started anew for each count).
	startAlone := func(n int) error {
		var settings map[string]string
		if p := b.cfg.workerProcs(n); p != "" {
			settings = map[string]string{"GOMAXPROCS": p}
		}
		return startUpToWith(n, settings)
	}
	if b.cfg.WorkerProcs != "" {
		procs := make([]string, len(drainCounts))
		for i, n := range drainCounts {
			procs[i] = b.cfg.workerProcs(n)
		}
		b.rep.note(fmt.Sprintf("throughput (workers alone): --worker-gomaxprocs %s: GOMAXPROCS %s for each of %s workers alone (Go's own for the api and the other topologies)",
			b.cfg.WorkerProcs, strings.Join(procs, " / "), countsLabel(drainCounts)))
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
	rates := map[int][]float64{}
	for r := range b.cfg.DrainRounds {
		for _, n := range drainOrder(r) {
			stopAll()
			tps, err := b.drainAlone(ctx, api, n, r, startAlone, &workers)
			if err != nil {
				stopAll()
				return nil, err
			}
			rates[n] = append(rates[n], tps)
		}
	}
	b.addDrainRates(rates)
	b.addDrainFlatness()
	if err := b.reconcilerScale(ctx, api, startAlone, stopAll); err != nil {
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
// cores. It returns the turns/s settled. Round r's drain adds its
// operations to the totals of n workers; the first round's adds the rows of
// what it cost, and every round's its turns/s (addDrainRates compares them).
func (b *bencher) drainAlone(ctx context.Context, api *benchDaemon, n, r int, start func(int) error, workers *[]*benchDaemon) (float64, error) {
	label := aloneLabel(n)
	if r > 0 {
		label = fmt.Sprintf("%s, round %d", label, r+1)
	}
	warm, dur := warmup(b.cfg.Duration), b.cfg.Duration
	// Enough for the window at the rate the api and n workers reached, with
	// a margin for the workers' start.
	// (8 workers: at the rate of the most the api had.)
	drainRate := cmp.Or(b.perf.turnsPerSecond[workersLabel(n)], b.perf.turnsPerSecond[workersLabel(workerCounts[len(workerCounts)-1])])
	backlog := int64(2.5 * drainRate * (warm + dur + 2*time.Second).Seconds())
	backlog = min(max(backlog, 1500), 100_000)
	b.vacuum(ctx)
	if err := b.askBacklog(ctx, api, backlog); err != nil {
		return 0, fmt.Errorf("%s: ask the backlog: %w", label, err)
	}
	before, err := b.settled(ctx)
	if err != nil {
		return 0, err
	}
	if err := start(n); err != nil {
		return 0, err
	}
	if err := chat.Sleep(ctx, warm); err != nil {
		return 0, err
	}
	ws := *workers
	tFrom, cpuFrom, useFrom := time.Now(), cpuTimes(ws, (*benchDaemon).cpu), b.sample(ctx, ws...)
	atFrom, err := b.settled(ctx)
	if err != nil {
		return 0, err
	}
	ranOut := false
	for time.Since(tFrom) < dur {
		left, err := b.anyPending(ctx)
		if err != nil {
			return 0, err
		}
		if !left {
			ranOut = true
			break
		}
		if err := chat.Sleep(ctx, 50*time.Millisecond); err != nil {
			return 0, err
		}
	}
	tUntil, cpuUntil, useUntil := time.Now(), cpuTimes(ws, (*benchDaemon).cpu), b.sample(ctx, ws...)
	atUntil, err := b.settled(ctx)
	if err != nil {
		return 0, err
	}
	if _, _, err := b.drain(ctx, b.drainLimit()); err != nil {
		return 0, fmt.Errorf("%s: wait for the backlog: %w", label, err)
	}
	after, err := b.settled(ctx)
	if err != nil {
		return 0, err
	}
	b.checkFailures(ctx, "throughput ("+label+")", before, after)

	turns := total(atUntil) - total(atFrom)
	tps := float64(turns) / tUntil.Sub(tFrom).Seconds()
	b.noteDrainOps(n, useFrom, useUntil, turns)
	if ranOut {
		b.rep.note(fmt.Sprintf("throughput (%s): the backlog ran out %s into the %s window; the rate is over what was left", label, tUntil.Sub(tFrom).Round(time.Millisecond), dur))
	}
	if r > 0 {
		return tps, nil
	}
	b.rep.add("throughput P3", fmt.Sprintf("turns/s settled, %s, draining %d turns asked before they started", label, backlog), rate(tps), "", "")
	b.addDaemonCPU("throughput P3", "  CPU per turn (run), ", ws, cpuFrom, cpuUntil, turns)
	b.addUsage("throughput P3", "turn", useFrom, useUntil, turns, daemonCPU(cpuFrom, cpuUntil))
	b.noteStatements(label, useFrom, useUntil, turns)
	return tps, nil
}

// aloneLabel names the drain by n workers alone.
func aloneLabel(n int) string {
	if n == 1 {
		return "1 worker alone"
	}
	return fmt.Sprintf("%d workers alone", n)
}

// drainOrder is the order of round r's drains: drainCounts turned by r, so
// that over as many rounds as counts each count comes once in each place.
func drainOrder(r int) []int {
	k := r % len(drainCounts)
	return append(slices.Clone(drainCounts[k:]), drainCounts[:k]...)
}

// drainGoal is the least turns/s of n workers alone, as a share of one
// worker's: more processes must not drain slower.
const drainGoal = 0.9

// addDrainRates adds the rows of the workers alone's turns/s: the median of
// each count's rounds, each round's, and the ratio of the medians to one
// worker's.
func (b *bencher) addDrainRates(rates map[int][]float64) {
	med := map[int]float64{}
	for _, n := range drainCounts {
		if len(rates[n]) > 0 {
			med[n] = median(rates[n])
		}
	}
	if b.perf.turnsPerSecond == nil {
		b.perf.turnsPerSecond = map[string]float64{}
	}
	rounds := len(rates[drainCounts[0]])
	for _, n := range drainCounts {
		parts := make([]string, len(rates[n]))
		for i, v := range rates[n] {
			parts[i] = rate(v)
		}
		b.perf.turnsPerSecond[aloneLabel(n)] = med[n]
		b.rep.add("throughput P3", fmt.Sprintf("turns/s settled, %s, median of %d rounds (%s)", aloneLabel(n), rounds, strings.Join(parts, " / ")), rate(med[n]), "", "")
		if one := med[1]; n > 1 && one > 0 {
			ratio := med[n] / one
			b.rep.add("throughput P3", fmt.Sprintf("  ratio to 1 worker alone, medians (linear: %d)", n), fmt.Sprintf("%.2f", ratio), fmt.Sprintf("≥ %.2f", drainGoal), verdict(ratio >= drainGoal))
		}
	}
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
