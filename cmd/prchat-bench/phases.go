package main

import (
	"cmp"
	"context"
	"fmt"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prchat/prchat/chat"
)

// pending counts the turns that are queued or running. On Postgres it
// counts them through the pending turns' partial index, by its predicate
// (finished_at IS NULL, which prchat's check keeps the same as the state
// being queued or running): counting every turn by state, 20 times a
// second, cost Postgres about 0.3 ms per turn settled, which the bench
// then showed as prchat's.
func (b *bencher) pending(ctx context.Context) (int64, error) {
	b.ownQueries.Add(1)
	if b.pg != nil {
		var n int64
		err := b.pg.QueryRowContext(ctx, `SELECT count(*) FROM turns WHERE finished_at IS NULL`).Scan(&n)
		return n, err
	}
	counts, err := b.db.CountTurns(ctx)
	if err != nil {
		return 0, err
	}
	return counts[chat.StateQueued] + counts[chat.StateRunning], nil
}

// anyPending reports whether a turn is queued or running. On Postgres it
// looks for one instead of counting them all: with a backlog of 13,000
// turns and the server's autovacuum off, a count took 52 ms on average
// (pg_stat_statements), polled 20 times a second while workers drained the
// backlog, so that a backend of the bench's was busy most of the window;
// looking for one by state took 24 ms, reading every turn (1,570 buffers),
// and by the pending index's predicate it reads a few.
func (b *bencher) anyPending(ctx context.Context) (bool, error) {
	if b.pg == nil {
		n, err := b.pending(ctx)
		return n > 0, err
	}
	b.ownQueries.Add(1)
	var found bool
	err := b.pg.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM turns WHERE finished_at IS NULL)`).Scan(&found)
	return found, err
}

// vacuum vacuums and analyzes the tables of the bench's schema on
// Postgres, between windows, so that every window starts on tables in the
// same state: with the server's autovacuum off (as on a test machine)
// every turn settled leaves dead rows and dead index entries that nothing
// removes, and each window would run on the garbage of all the ones
// before it. A failure is noted, not fatal.
func (b *bencher) vacuum(ctx context.Context) {
	if b.pg == nil {
		return
	}
	b.ownQueries.Add(1)
	rows, err := b.pg.QueryContext(ctx, `SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = current_schema()`)
	if err != nil {
		b.noteVacuum(err)
		return
	}
	var tables []string
	for err == nil && rows.Next() {
		var t string
		if err = rows.Scan(&t); err == nil {
			tables = append(tables, t)
		}
	}
	rows.Close()
	if err = cmp.Or(err, rows.Err()); err != nil || len(tables) == 0 {
		b.noteVacuum(err)
		return
	}
	start := time.Now()
	b.ownQueries.Add(1)
	if _, err := b.pg.ExecContext(ctx, `VACUUM (ANALYZE) `+strings.Join(tables, ", ")); err != nil {
		b.noteVacuum(err)
		return
	}
	b.vacuums.n++
	b.vacuums.took += time.Since(start)
}

// noteVacuums notes the vacuums of the whole run (every phase whose
// throughput windows ran on Postgres made them).
func (b *bencher) noteVacuums(ctx context.Context) {
	if v := b.vacuums; v.n > 0 {
		b.rep.note(fmt.Sprintf("throughput: before each window the bench vacuumed its schema's tables (VACUUM (ANALYZE), %d times, %s in all, outside the windows; the server's autovacuum is %s): a window's figures do not include removing the garbage the turns before it left, nor cleaning up after the ones in it", v.n, v.took.Round(time.Millisecond), b.autovacuum(ctx)))
	}
}

// noteVacuum notes the first failed vacuum.
func (b *bencher) noteVacuum(err error) {
	if err != nil && !b.vacuums.failed {
		b.vacuums.failed = true
		b.rep.note(fmt.Sprintf("vacuum between windows failed (the later windows run on the garbage of the earlier): %v", err))
	}
}

// settled counts the turns in a final state, by state.
func (b *bencher) settled(ctx context.Context) (map[string]int64, error) {
	b.ownQueries.Add(1)
	counts, err := b.db.CountTurns(ctx)
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for state, n := range counts {
		if state.Final() {
			m[string(state)] = n
		}
	}
	return m, nil
}

// recentTurns is how many of the turns that finished last the bench reads
// for their times and failures.
const recentTurns = 20000

// total sums the counts of m.
func total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// checkFailures notes turns that settled other than succeeded between two
// counts, with the reason of the last one.
func (b *bencher) checkFailures(ctx context.Context, phase string, before, after map[string]int64) {
	var bad []string
	for state, n := range after {
		if state != "succeeded" && n > before[state] {
			bad = append(bad, fmt.Sprintf("%d %s", n-before[state], state))
		}
	}
	if len(bad) == 0 {
		return
	}
	slices.Sort(bad)
	why := ""
	b.ownQueries.Add(1)
	finished, _ := b.db.FinishedTurns(ctx, recentTurns)
	for _, t := range finished {
		if t.State != chat.StateSucceeded {
			note, _, _ := strings.Cut(t.Note, "\n")
			why = fmt.Sprintf(" (last: %s: %s)", t.Reason, note)
			break
		}
	}
	b.rep.note(fmt.Sprintf("%s: turns that did not succeed: %s%s", phase, strings.Join(bad, ", "), why))
}

// turnTimes returns, for the turns created in [from, until] that settled,
// their wait in the queue (created → started) and their run (started →
// finished) as the daemon recorded them, sorted.
func (b *bencher) turnTimes(ctx context.Context, from, until time.Time) (wait, run durations, err error) {
	b.ownQueries.Add(1)
	rows, err := b.db.FinishedTurns(ctx, recentTurns)
	if err != nil {
		return nil, nil, fmt.Errorf("read turn times: %w", err)
	}
	for _, r := range rows {
		if r.StartedAt == nil || r.FinishedAt == nil || r.CreatedAt.Before(from) || r.CreatedAt.After(until) {
			continue
		}
		wait = append(wait, r.StartedAt.Sub(r.CreatedAt))
		run = append(run, r.FinishedAt.Sub(*r.StartedAt))
	}
	return wait.sorted(), run.sorted(), nil
}

// drain waits until no turn is pending, and returns how many were pending
// when it began and how long they took.
func (b *bencher) drain(ctx context.Context, limit time.Duration) (int64, time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// Counted once; then polled for whether any is left (anyPending).
	first, err := b.pending(ctx)
	left := first > 0
	for err == nil && left {
		select {
		case <-ctx.Done():
			return first, time.Since(start), fmt.Errorf("turns still pending after %s", limit)
		case <-time.After(50 * time.Millisecond):
		}
		left, err = b.anyPending(ctx)
	}
	return first, time.Since(start), err
}

// drainLimit bounds a wait for the pending turns.
func (b *bencher) drainLimit() time.Duration { return max(2*time.Minute, 10*b.cfg.Duration) }

// warmup is the unmeasured start of a load of duration d.
func warmup(d time.Duration) time.Duration { return min(time.Second, d/5) }

// idleMemory measures the serve daemon's RSS once it settled after start,
// then the CPU it uses while nothing is asked (the worker's idle polls of
// Redis, heartbeats, the reconciler) over as long again.
func (b *bencher) idleMemory(ctx context.Context, serve *benchDaemon) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(b.cfg.Settle):
	}
	what := fmt.Sprintf("idle serve RSS (%s after start)", b.cfg.Settle)
	rss, err := serve.rss()
	if err != nil {
		b.rep.add("memory P7", what, "n/a", "< 60 MB", "")
		b.rep.note("memory: " + err.Error())
		return
	}
	b.rep.add("memory P7", what, mb(rss), "< 60 MB", verdict(rss < 60<<20))

	b.idleCPU(ctx, serve)
}

// idleCPU measures the CPU the daemons use, per second, while nothing is
// asked, over the settle time, to the nanosecond, and reports it (memory
// P7).
func (b *bencher) idleCPU(ctx context.Context, daemons ...*benchDaemon) {
	cpu0 := cpuTimes(daemons, (*benchDaemon).cpuFine)
	t0 := time.Now()
	if chat.Sleep(ctx, b.cfg.Settle) != nil {
		return
	}
	cpu1 := cpuTimes(daemons, (*benchDaemon).cpuFine)
	took := time.Since(t0).Seconds()
	for i, d := range daemons {
		if cpu0[i] < 0 || cpu1[i] < 0 {
			b.rep.note("idle CPU of " + d.name + ": unknown")
			continue
		}
		perSecond := time.Duration(float64(cpu1[i]-cpu0[i]) / took)
		b.rep.add("memory P7", fmt.Sprintf("  idle %s CPU, per second (over %s)", d.name, b.cfg.Settle), ms(perSecond), "", "")
	}
}

// intake measures the floor and the HTTP intake of the serve daemon in
// alternating rounds, so that both see the same machine. The serve
// daemon's worker runs the asked turns meanwhile; their backlog is worked
// off before the next round.
func (b *bencher) intake(ctx context.Context, serve *benchDaemon) error {
	before, err := b.settled(ctx)
	if err != nil {
		return err
	}
	if err := b.intakeOn(ctx, serve, "1 serve", true); err != nil {
		return err
	}
	after, err := b.settled(ctx)
	if err != nil {
		return err
	}
	b.checkFailures(ctx, "intake", before, after)
	b.rep.note("intake (1 serve): the serve daemon's worker runs the asked turns at the same time (the realistic case); their backlog is worked off between rounds")
	return nil
}

// intakeOn measures the floor and the intake of the API of d in
// alternating rounds. With worker, the turns asked in a round are worked
// off before the next; without, they stay queued.
func (b *bencher) intakeOn(ctx context.Context, d *benchDaemon, label string, worker bool) error {
	f, err := b.openFloor(ctx)
	if err != nil {
		return err
	}
	defer f.close()
	rounds := 1
	if b.cfg.Duration >= 4*time.Second {
		rounds = 2
	}
	slice := b.cfg.Duration / time.Duration(rounds)
	body := askBody(benchQuestion)
	var fl, in loadResult
	var drained int64
	var drainTime time.Duration
	for range rounds {
		var r loadResult
		pprof.Do(ctx, pprof.Labels("part", "floor"), func(ctx context.Context) {
			r = runLoad(ctx, b.cfg.Clients, warmup(slice), slice, 0, f.ask)
		})
		fl = fl.add(r)
		if err := f.dropJobs(); err != nil {
			return err
		}
		in = in.add(runLoad(ctx, b.cfg.Clients, warmup(slice), slice, 0, func(ctx context.Context) error {
			_, err := b.ask(ctx, d.url, body, false)
			return err
		}))
		if !worker {
			continue
		}
		n, took, err := b.drain(ctx, b.drainLimit())
		if err != nil {
			return fmt.Errorf("intake: wait for the asked turns: %w", err)
		}
		drained += n
		drainTime += took
	}
	b.noteErrors("floor (beside "+label+")", fl)
	b.noteErrors("intake ("+label+")", in)

	// The same clients at half the floor's rate: the latency of an intake
	// that keeps up, where the closed loops above measure a saturated one.
	var paced loadResult
	pacedRate := fl.perSecond() / 2
	if pacedRate > 0 {
		pace := time.Duration(float64(b.cfg.Clients) / pacedRate * float64(time.Second))
		paced = runLoad(ctx, b.cfg.Clients, warmup(slice), slice, pace, func(ctx context.Context) error {
			_, err := b.ask(ctx, d.url, body, false)
			return err
		})
		b.noteErrors("intake at half the floor's rate ("+label+")", paced)
		if worker {
			if _, _, err := b.drain(ctx, b.drainLimit()); err != nil {
				return fmt.Errorf("intake: wait for the asked turns: %w", err)
			}
		}
	}

	ratio := 0.0
	if fl.perSecond() > 0 {
		ratio = in.perSecond() / fl.perSecond()
	}
	clients := strconv.Itoa(b.cfg.Clients)
	b.rep.add("floor", "asks/s, "+clients+" loops, no HTTP (beside "+label+")", rate(fl.perSecond()), "", "")
	b.rep.add("floor", "  latency p50 / p99", fl.lat.p50p99(), "", "")
	b.rep.add("intake P1", "asks/s accepted, "+clients+" HTTP clients, "+label, rate(in.perSecond()), "", "")
	b.rep.add("intake P1", "  ratio to the floor", fmt.Sprintf("%.2f", ratio), "≥ 0.70", verdict(ratio >= 0.7))
	b.rep.add("intake P1", "  latency p50 / p99", in.lat.p50p99(), "p99 < 25 ms", verdict(len(in.lat) > 0 && in.lat.percentile(99) < 25*time.Millisecond))
	if len(paced.lat) > 0 {
		b.rep.add("intake P1", fmt.Sprintf("  latency p50 / p99 at half the floor's rate (%s asks/s paced)", rate(pacedRate)), paced.lat.p50p99(), "", "")
	}
	if drainTime > 0 && drained > 0 {
		b.rep.add("intake P1", "  backlog worked off between rounds, turns/s", rate(float64(drained)/drainTime.Seconds()), "", "")
	}
	if label == "1 serve" {
		b.rep.note(fmt.Sprintf("floor: %s; %d alternating rounds of %s each with the intake", f.where, rounds, slice))
	}
	return nil
}

// noteErrors notes the failed operations of a load.
func (b *bencher) noteErrors(phase string, r loadResult) {
	if r.errs > 0 {
		b.rep.note(fmt.Sprintf("%s: %d operations failed, first: %v", phase, r.errs, r.firstErr))
	}
}

// overhead times sequential turns from the POST to the done event.
func (b *bencher) overhead(ctx context.Context, serve *benchDaemon) error {
	const warm = 5
	body := askBody(benchQuestion)
	client := newLoadClient(4)
	var total, post durations
	var from time.Time
	for i := range warm + b.cfg.Turns {
		if i == warm {
			from = time.Now()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t0 := time.Now()
		conv, err := b.ask(tctx, serve.url, body, true)
		t1 := time.Now()
		var final string
		if err == nil {
			final, err = follow(tctx, client, serve.url, conv, false, nil, nil)
		}
		t2 := time.Now()
		cancel()
		if err != nil {
			return fmt.Errorf("overhead: turn %d: %w", i+1, err)
		}
		if final != "done" {
			return fmt.Errorf("overhead: turn %d ended with %s, not done", i+1, final)
		}
		if i >= warm {
			total = append(total, t2.Sub(t0))
			post = append(post, t1.Sub(t0))
		}
	}
	client.CloseIdleConnections()
	total, post = total.sorted(), post.sorted()
	label := fmt.Sprintf("POST → done over SSE, p50 / p99 (%d turns)", b.cfg.Turns)
	ok := total.percentile(50) <= 10*time.Millisecond && total.percentile(99) <= 30*time.Millisecond
	b.rep.add("overhead P2", label, total.p50p99(), "≤ 10 / ≤ 30 ms", verdict(ok))
	b.rep.add("overhead P2", "  of which POST → 202, p50 / p99", post.p50p99(), "", "")
	if wait, run, err := b.turnTimes(ctx, from, time.Now()); err == nil && len(run) > 0 {
		b.rep.add("overhead P2", "  queue wait / run p50, as the daemon recorded", ms(wait.percentile(50))+" / "+ms(run.percentile(50)), "", "")
	}
	return nil
}

// throughput measures how many turns the daemons settle per second with
// clients askers keeping a backlog of queued turns, and samples the RSS of
// the daemons.
func (b *bencher) throughput(ctx context.Context, label string, api *benchDaemon, daemons []*benchDaemon) error {
	b.vacuum(ctx)
	backlog := int64(4 * b.cfg.Clients)
	body := askBody(benchQuestion)
	warm, dur := warmup(b.cfg.Duration), b.cfg.Duration
	before, err := b.settled(ctx)
	if err != nil {
		return err
	}

	// The poller keeps the pending count for the askers and the peak RSS of
	// each daemon.
	var pending atomic.Int64
	peaks := make([]int64, len(daemons))
	pctx, stopPoll := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pctx.Err() == nil {
			if n, err := b.pending(pctx); err == nil {
				pending.Store(n)
			}
			for i, d := range daemons {
				if rss, err := d.rss(); err == nil {
					peaks[i] = max(peaks[i], rss)
				}
			}
			select {
			case <-pctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	// The settled count at both ends of the window.
	var atFrom, atUntil map[string]int64
	var tFrom, tUntil time.Time
	var cpuFrom, cpuUntil []time.Duration
	var useFrom, useUntil usage
	marks := window(ctx, warm, dur, func() (err error) {
		tFrom = time.Now()
		cpuFrom = cpuTimes(daemons, (*benchDaemon).cpu)
		useFrom = b.sample(ctx, daemons...)
		atFrom, err = b.settled(ctx)
		return err
	}, func() (err error) {
		tUntil = time.Now()
		cpuUntil = cpuTimes(daemons, (*benchDaemon).cpu)
		useUntil = b.sample(ctx, daemons...)
		atUntil, err = b.settled(ctx)
		return err
	})
	asks := runLoad(ctx, b.cfg.Clients, warm, dur, 0, func(ctx context.Context) error {
		for pending.Load() >= backlog {
			if err := chat.Sleep(ctx, 2*time.Millisecond); err != nil {
				return err
			}
		}
		pending.Add(1)
		_, err := b.ask(ctx, api.url, body, false)
		return err
	})
	err = <-marks
	stopPoll()
	<-polled
	if err != nil {
		return fmt.Errorf("throughput: %w", err)
	}
	if _, _, err := b.drain(ctx, b.drainLimit()); err != nil {
		return fmt.Errorf("throughput: wait for the asked turns: %w", err)
	}
	after, err := b.settled(ctx)
	if err != nil {
		return err
	}
	b.checkFailures(ctx, "throughput ("+label+")", before, after)
	b.noteErrors("throughput ("+label+")", asks)

	turns := total(atUntil) - total(atFrom)
	tps := float64(turns) / tUntil.Sub(tFrom).Seconds()
	if b.cfg.has(phaseThroughput) {
		goal, v := "", ""
		if label == "1 serve" {
			goal, v = "≥ 500", verdict(tps >= 500)
		}
		b.rep.add("throughput P3", "turns/s settled, "+label, rate(tps), goal, v)
		b.addRatios(label, tps)
		if wait, run, err := b.turnTimes(ctx, tFrom, tUntil); err == nil && len(run) > 0 {
			b.rep.add("throughput P3", "  queue wait / run p50, as the daemon recorded", ms(wait.percentile(50))+" / "+ms(run.percentile(50)), "", "")
		}
		b.addDaemonCPU("throughput P3", "  CPU per turn (ask + run), ", daemons, cpuFrom, cpuUntil, turns)
		b.addUsage("throughput P3", "turn", useFrom, useUntil, turns, daemonCPU(cpuFrom, cpuUntil))
		b.noteStatements(label, useFrom, useUntil, turns)
	}
	if label == "1 serve" && b.cfg.has(phaseMemory) {
		if peaks[0] > 0 {
			b.rep.add("memory P7", "peak serve RSS under load (throughput)", mb(peaks[0]), "", "")
		} else {
			b.rep.add("memory P7", "peak serve RSS under load (throughput)", "n/a", "", "")
		}
	}
	if label != "1 serve" && b.cfg.has(phaseThroughput) {
		var parts []string
		for i, d := range daemons {
			if peaks[i] > 0 {
				parts = append(parts, d.name+" "+mb(peaks[i]))
			}
		}
		if len(parts) > 0 {
			b.rep.note(fmt.Sprintf("throughput (%s): peak RSS %s", label, strings.Join(parts, ", ")))
		}
	}
	return nil
}

// addDaemonCPU adds the row of the CPU per turn of each daemon between two
// readings, if every one is known.
func (b *bencher) addDaemonCPU(section, measure string, daemons []*benchDaemon, from, until []time.Duration, turns int64) {
	var parts []string
	for i := range daemons {
		if from[i] >= 0 && until[i] >= 0 && turns > 0 {
			parts = append(parts, ms((until[i]-from[i])/time.Duration(turns)))
		}
	}
	if len(parts) == len(daemons) {
		names := make([]string, len(daemons))
		for i, d := range daemons {
			names[i] = d.name
		}
		b.rep.add(section, measure+strings.Join(names, " + "), strings.Join(parts, " + "), "", "")
	}
}

// daemonCPU sums the CPU the daemons used between two readings (those
// known).
func daemonCPU(from, until []time.Duration) time.Duration {
	var sum time.Duration
	for i := range from {
		if from[i] >= 0 && until[i] >= 0 {
			sum += until[i] - from[i]
		}
	}
	return sum
}

// addRatios notes a topology's throughput and adds its ratios: of a split
// topology to 1 serve, and of api + 1 worker to asynq's own floor.
func (b *bencher) addRatios(label string, tps float64) {
	if b.perf.turnsPerSecond == nil {
		b.perf.turnsPerSecond = map[string]float64{}
	}
	b.perf.turnsPerSecond[label] = tps
	if serve := b.perf.turnsPerSecond["1 serve"]; label != "1 serve" && serve > 0 {
		goal, v := "", ""
		if label == oneWorker {
			goal, v = "≥ 0.80", verdict(tps >= 0.8*serve)
		}
		b.rep.add("throughput P3", "  ratio to 1 serve", fmt.Sprintf("%.2f", tps/serve), goal, v)
	}
	if label == oneWorker && b.perf.queueFloor > 0 {
		b.rep.add("throughput P3", "  ratio to the asynq floor", fmt.Sprintf("%.2f", tps/b.perf.queueFloor), "", "")
	}
}

// cpuTimes returns the CPU time each daemon used so far as read reads it
// (cpu, or cpuFine for small figures), -1 where unknown.
func cpuTimes(daemons []*benchDaemon, read func(*benchDaemon) (time.Duration, error)) []time.Duration {
	out := make([]time.Duration, len(daemons))
	for i, d := range daemons {
		c, err := read(d)
		if err != nil {
			c = -1
		}
		out[i] = c
	}
	return out
}

// window measures a window of a load: it calls begin once warm has
// passed and end once dur has passed since, in a goroutine of its own,
// and sends the first error (nil if none) on the channel it returns.
func window(ctx context.Context, warm, dur time.Duration, begin, end func() error) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			if err := chat.Sleep(ctx, warm); err != nil {
				return err
			}
			t0 := time.Now()
			if err := begin(); err != nil {
				return err
			}
			if err := chat.Sleep(ctx, dur-time.Since(t0)); err != nil {
				return err
			}
			return end()
		}()
	}()
	return done
}

// autovacuum is the server's autovacuum setting, "unknown" when it cannot
// be read.
func (b *bencher) autovacuum(ctx context.Context) string {
	if b.pg == nil {
		return "unknown"
	}
	var on string
	b.ownQueries.Add(1)
	if b.pg.QueryRowContext(ctx, `SHOW autovacuum`).Scan(&on) != nil {
		return "unknown"
	}
	return on
}
