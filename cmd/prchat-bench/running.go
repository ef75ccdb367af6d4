package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prchat/prchat/chat"
)

const (
	// runningInterval is the spacing of a running turn's events.
	runningInterval = 500 * time.Millisecond
	// heartbeatTTL and heartbeatInterval are the workers' heartbeat TTL
	// and beat interval (worker.Heartbeat's defaults; prchat has no setting
	// for them), reconcileInterval the reconciler's pass
	// (PRCHAT_RECONCILE_INTERVAL's default): a killed worker's turns are
	// taken over once its heartbeat expired and a reconciler passed.
	heartbeatTTL      = 9 * time.Second
	heartbeatInterval = heartbeatTTL / 3
	reconcileInterval = 5 * time.Second
	// heartbeatKeyPrefix starts the key of a worker's heartbeat, whose
	// remaining TTL tells when it beat last (see worker.Heartbeat).
	heartbeatKeyPrefix = "prchat:worker:"
	// runningPoll is how often the phase reads the turns' states and the
	// heartbeat's TTL.
	runningPoll = 50 * time.Millisecond
	// askParallelism bounds the asks of the running phase under way at once.
	askParallelism = 16
)

// runningHold is how long the turns of the running phase wait before their
// first event: long enough for n turns to be asked and claimed and their
// subscribers to connect on a busy machine.
func runningHold(n int) time.Duration {
	return min(2*time.Second+time.Duration(n)*10*time.Millisecond, 30*time.Second)
}

// runningEvents is how many events each turn of the running phase emits:
// enough to outlast the measured window d and, with a takeover, the start
// of the spare worker and the kill, with room for a slow machine.
func runningEvents(d time.Duration, takeover bool) int {
	span := d + 5*time.Second
	if takeover {
		span = 2*d + 10*time.Second
	}
	return int((span + runningInterval - 1) / runningInterval)
}

// sentEvent is a timestamped event a subscriber read: the agent's send
// time and the time the bench read it.
type sentEvent struct {
	sent time.Time
	lat  time.Duration
}

// running runs many slow turns at once on one worker process whose
// PRCHAT_CONCURRENCY is their count, each followed by a subscriber on the
// API process, and measures the worker's memory, goroutines and CPU per
// running turn, the delivery of their events and the worker's heartbeat.
// Then it starts a spare worker, kills the loaded one with SIGKILL and
// times until every turn is taken over and settled, and checks that none
// is lost or answered twice. On the embedded Redis all of it but the
// heartbeat and the takeover runs on one serve daemon.
func (b *bencher) running(ctx context.Context) error {
	n := b.cfg.RunningTurns
	settings := map[string]string{"PRCHAT_CONCURRENCY": strconv.Itoa(n)}
	split := b.rdb != nil
	var api, busy *benchDaemon
	var err error
	if split {
		if api, err = b.startDaemon(ctx, "api", "api"); err != nil {
			return err
		}
		defer b.stopDaemon(api)
		if busy, err = b.startDaemonWith(ctx, "worker", "worker-busy", settings); err != nil {
			return err
		}
	} else {
		if busy, err = b.startDaemonWith(ctx, "serve", "serve", settings); err != nil {
			return err
		}
		api = busy
	}
	defer b.stopDaemon(busy)
	var beats *beatLog
	if split {
		beats = b.watchHeartbeat(ctx, busy.workerID)
		defer beats.stop()
	}

	// The idle worker.
	if err := chat.Sleep(ctx, b.cfg.Settle); err != nil {
		return err
	}
	rssIdle, rssErr := busy.rss()
	goIdle, goErr := b.workerGoStats(ctx, busy)
	cpu0, cpuErr := busy.cpu()
	t0 := time.Now()
	if err := chat.Sleep(ctx, b.cfg.Settle); err != nil {
		return err
	}
	cpu1, cpuErr1 := busy.cpu()
	idleCPU := time.Duration(float64(cpu1-cpu0) / time.Since(t0).Seconds())
	cpuErr = cmp.Or(cpuErr, cpuErr1)

	// Ask the turns and follow each.
	hold := runningHold(n)
	events := runningEvents(b.cfg.Duration, split)
	body := askBody(fmt.Sprintf("events=%d interval=%s hold=%s", events, runningInterval, hold))
	askedAt := time.Now()
	convs, err := b.askMany(ctx, api.url, body, n)
	if err != nil {
		return fmt.Errorf("running: %w", err)
	}
	turnIDs, err := b.turnsOf(ctx, convs)
	if err != nil {
		return fmt.Errorf("running: %w", err)
	}
	turnLength := hold + time.Duration(events)*runningInterval
	sctx, cancel := context.WithTimeout(ctx, 3*turnLength+3*time.Minute)
	defer cancel()
	subs := b.subscribe(sctx, api.url, convs)

	// All running on the loaded worker?
	busyRunner := busy.workerID + "/"
	if !split {
		busyRunner = ""
	}
	allRunning, err := b.waitTurns(sctx, turnIDs, func(s turnState) bool { return s.state == "running" && strings.HasPrefix(s.runner, busyRunner) })
	if err != nil {
		return fmt.Errorf("running: wait for the %d turns to run: %w", n, err)
	}
	runningAfter := allRunning.Sub(askedAt)

	// The measured window: every turn streams.
	if err := chat.Sleep(ctx, time.Until(allRunning.Add(hold+runningInterval))); err != nil {
		return err
	}
	wFrom := time.Now()
	cpuFrom, cpuErr2 := busy.cpu()
	if err := chat.Sleep(ctx, b.cfg.Duration); err != nil {
		return err
	}
	cpuUntil, cpuErr3 := busy.cpu()
	wUntil := time.Now()
	rssLoaded, rssErr2 := busy.rss()
	goLoaded, goErr2 := b.workerGoStats(ctx, busy)
	cpuErr = cmp.Or(cpuErr, cpuErr2, cpuErr3)
	rssErr, goErr = cmp.Or(rssErr, rssErr2), cmp.Or(goErr, goErr2)

	// The takeover: a spare worker, then SIGKILL the loaded one.
	var killedAt, takenOver, settled, keyGone time.Time
	var beatGaps durations
	var leastTTL time.Duration
	var early int
	if split {
		spare, err := b.startDaemonWith(ctx, "worker", "worker-spare", settings)
		if err != nil {
			return err
		}
		defer b.stopDaemon(spare)
		states, err := b.turnStates(ctx, turnIDs)
		if err != nil {
			return fmt.Errorf("running: %w", err)
		}
		for _, s := range states {
			if s.state != "running" || !strings.HasPrefix(s.runner, busyRunner) {
				early++
			}
		}
		killedAt = time.Now()
		if err := busy.cmd.Process.Kill(); err != nil {
			return fmt.Errorf("running: kill %s: %w", busy.name, err)
		}
		<-busy.exited
		beatGaps, leastTTL = beats.gaps(askedAt, killedAt)
		beats.untilGone()
		if takenOver, err = b.waitTurns(sctx, turnIDs, func(s turnState) bool { return s.final() || !strings.HasPrefix(s.runner, busyRunner) }); err != nil {
			return fmt.Errorf("running: wait for the takeover: %w", err)
		}
		keyGone = beats.goneAt()
	}
	if settled, err = b.waitTurns(sctx, turnIDs, turnState.final); err != nil {
		return fmt.Errorf("running: wait for the turns to settle: %w", err)
	}
	subs.wait()

	// The figures.
	const sec = "running"
	b.rep.add(sec, fmt.Sprintf("%d turns asked → all running on %s", n, busy.name), secs(runningAfter), "", "")
	if rssErr == nil {
		b.rep.add(sec, fmt.Sprintf("%s RSS idle → with %d running", busy.name, n), mb(rssIdle)+" → "+mb(rssLoaded), "", "")
		b.rep.add(sec, "  RSS per running turn", fmt.Sprintf("%.1f KB", float64(rssLoaded-rssIdle)/float64(n)/1024), "", "")
	}
	if goErr == nil {
		per := func(k string) float64 { return (goLoaded[k] - goIdle[k]) / float64(n) }
		b.rep.add(sec, fmt.Sprintf("  goroutines idle → with %d running (per running turn)", n),
			fmt.Sprintf("%.0f → %.0f (%.1f)", goIdle["go_goroutines"], goLoaded["go_goroutines"], per("go_goroutines")), "", "")
		b.rep.add(sec, "  Go heap in use / stacks, per running turn",
			fmt.Sprintf("%.1f KB / %.1f KB", per("go_memstats_heap_inuse_bytes")/1024, per("go_memstats_stack_inuse_bytes")/1024), "", "")
	}
	if cpuErr == nil {
		window := wUntil.Sub(wFrom)
		loaded := time.Duration(float64(cpuUntil-cpuFrom) / window.Seconds())
		b.rep.add(sec, fmt.Sprintf("%s CPU per second, idle → with %d running", busy.name, n), ms(idleCPU)+" → "+ms(loaded), "", "")
		b.rep.add(sec, "  CPU per running turn per second", ms(loaded/time.Duration(n)), "", "")
		sent := float64(n) * window.Seconds() / runningInterval.Seconds()
		b.rep.add(sec, "  CPU per event sent", fmt.Sprintf("%.0f µs", float64((cpuUntil-cpuFrom).Microseconds())/sent), "", "")
	}
	loadedLat, afterLat := subs.latencies(askedAt, cmp.Or(killedAt, settled), killedAt)
	b.rep.add(sec, fmt.Sprintf("delivery p50 / p99, %s to %d subscribers on %s", busy.name, n, api.name), loadedLat.p50p99(), "", "")
	if split {
		gaps := "n/a"
		if len(beatGaps) > 0 {
			gaps = secs(beatGaps.percentile(50)) + " / " + secs(beatGaps.percentile(100))
		}
		b.rep.add(sec, "heartbeat of "+busy.name+": gap between beats p50 / max", gaps,
			"max < "+secs(heartbeatTTL)+" (TTL)", verdict(len(beatGaps) > 0 && beatGaps.percentile(100) < heartbeatTTL))
		b.rep.add(sec, "  least heartbeat TTL left", secs(leastTTL), "", "")
		b.rep.add(sec, fmt.Sprintf("takeover: SIGKILL → all %d running on worker-spare or settled", n), secs(takenOver.Sub(killedAt)),
			"≤ "+secs(heartbeatTTL+reconcileInterval)+" (TTL + a pass)", verdict(takenOver.Sub(killedAt) <= heartbeatTTL+reconcileInterval))
		if !keyGone.IsZero() {
			b.rep.add(sec, "  of which until the heartbeat expired", secs(keyGone.Sub(killedAt)), "", "")
		}
		b.rep.add(sec, "  SIGKILL → all settled", secs(settled.Sub(killedAt)), "", "")
		b.rep.add(sec, "  delivery p50 / p99 after the takeover, worker-spare", afterLat.p50p99(), "", "")
	}
	if err := b.checkRunning(ctx, sec, turnIDs, subs); err != nil {
		return err
	}

	b.rep.note(fmt.Sprintf("running: %d turns (PRCHAT_CONCURRENCY=%d on %s), each waits %s then emits %d tool_result events %s apart, one subscriber each; the figures under load are of a %s window once all stream; memory and goroutines per running turn are (with − idle) / %d, CPU per running turn all of the worker's CPU / %d (an idle worker's polls stop while its slots are full); delivery is the time the bench read an event minus the send time the agent wrote in it",
		n, n, busy.name, hold, events, runningInterval, b.cfg.Duration, n, n))
	if split {
		b.rep.note(fmt.Sprintf("running: then worker-spare (PRCHAT_CONCURRENCY=%d) starts and %s is killed with SIGKILL; a turn is taken over once it runs on another runner or settled. The takeover waits for the killed worker's heartbeat to expire (TTL %s, beats every %s) and a reconciler pass (every %s), far inside the turn policy's windows (takeover of a live runner's turn after turn timeout + 1.5 min); heartbeat gaps are the beats' times read from the key's TTL from the asks to the kill",
			n, busy.name, secs(heartbeatTTL), secs(heartbeatInterval), secs(reconcileInterval)))
		if early > 0 {
			b.rep.note(fmt.Sprintf("running: %d of the %d turns were no longer running on %s when it was killed", early, n, busy.name))
		}
	} else {
		b.rep.note("running: on the embedded Redis the phase runs on one serve daemon (its figures include the subscribers' side); the heartbeat and the takeover need --redis-url (and --database-url)")
	}
	return nil
}

// checkRunning reports how the turns of the running phase ended: each must
// have succeeded with one stored answer and one done event, and each
// subscriber's stream must have ended with done.
func (b *bencher) checkRunning(ctx context.Context, sec string, turnIDs []string, subs *subscribers) error {
	turns, err := b.db.TurnsByID(ctx, turnIDs)
	if err != nil {
		return fmt.Errorf("running: read the turns: %w", err)
	}
	states, runs := map[string]int{}, map[int64]int{}
	lost, twice := len(turnIDs)-len(turns), 0
	for _, t := range turns {
		events, err := b.db.Events(ctx, t.ID, 0)
		if err != nil {
			return fmt.Errorf("running: read the events of turn %s: %w", t.ID, err)
		}
		dones := 0
		for _, e := range events {
			if e.Type == chat.EventDone {
				dones++
			}
		}
		states[string(t.State)]++
		runs[t.Fence]++
		if t.State != chat.StateSucceeded || t.Answer == nil || dones == 0 {
			lost++
		}
		if dones > 1 {
			twice++
		}
	}
	badStreams, firstErr := subs.failed()
	b.rep.add(sec, "turns lost / answered twice / streams not ended with done", fmt.Sprintf("%d / %d / %d", lost, twice, badStreams), "0 / 0 / 0",
		verdict(lost == 0 && twice == 0 && badStreams == 0))
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(states)) {
		parts = append(parts, fmt.Sprintf("%d %s", states[s], s))
	}
	var rp []string
	for _, f := range slices.Sorted(maps.Keys(runs)) {
		rp = append(rp, fmt.Sprintf("%d turns %d", runs[f], f))
	}
	b.rep.note(fmt.Sprintf("running: the turns ended %s; runs (fences) per turn: %s", strings.Join(parts, ", "), strings.Join(rp, ", ")))
	if badStreams > 0 {
		b.rep.note(fmt.Sprintf("running: %d streams did not end with done; first: %v", badStreams, firstErr))
	}
	if states["succeeded"] != len(turnIDs) {
		b.checkFailures(ctx, "running", nil, toInt64(states))
	}
	return nil
}

func toInt64(m map[string]int) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = int64(v)
	}
	return out
}

// workerGoStats reads the Go gauges of d's /metrics, an API's or a
// worker's probes.
func (b *bencher) workerGoStats(ctx context.Context, d *benchDaemon) (map[string]float64, error) {
	return b.goStats(ctx, &benchDaemon{name: d.name, url: d.metrics})
}

// askMany asks n first questions with body at once (a few at a time) and
// returns their conversations.
func (b *bencher) askMany(ctx context.Context, base string, body []byte, n int) ([]string, error) {
	convs := make([]string, n)
	errs := make([]error, n)
	sem := make(chan struct{}, askParallelism)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			convs[i], errs[i] = b.ask(ctx, base, body, true)
		})
	}
	wg.Wait()
	return convs, errors.Join(errs...)
}

// turnsOf returns the ids of the first turns of convs.
func (b *bencher) turnsOf(ctx context.Context, convs []string) ([]string, error) {
	turns, err := b.db.FirstTurns(ctx, convs)
	if err != nil {
		return nil, fmt.Errorf("read the asked turns: %w", err)
	}
	ids := make([]string, len(turns))
	for i, t := range turns {
		ids[i] = t.ID
	}
	if len(ids) != len(convs) {
		return nil, fmt.Errorf("%d turns found of %d conversations", len(ids), len(convs))
	}
	return ids, nil
}

// turnState is what the running phase reads of a turn.
type turnState struct{ state, runner string }

func (s turnState) final() bool { return s.state != "queued" && s.state != "running" }

// turnStates reads the states of turnIDs.
func (b *bencher) turnStates(ctx context.Context, turnIDs []string) ([]turnState, error) {
	turns, err := b.db.TurnsByID(ctx, turnIDs)
	if err != nil {
		return nil, fmt.Errorf("read turn states: %w", err)
	}
	out := make([]turnState, len(turns))
	for i, t := range turns {
		out[i] = turnState{string(t.State), t.Runner}
	}
	return out, nil
}

// waitTurns waits until every one of turnIDs is in a state ok accepts and
// returns when it found them so.
func (b *bencher) waitTurns(ctx context.Context, turnIDs []string, ok func(turnState) bool) (time.Time, error) {
	for {
		states, err := b.turnStates(ctx, turnIDs)
		if err != nil {
			return time.Time{}, err
		}
		at := time.Now()
		n := 0
		for _, s := range states {
			if ok(s) {
				n++
			}
		}
		if n == len(turnIDs) {
			return at, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%d of %d turns so far: %w", n, len(turnIDs), ctx.Err())
		case <-time.After(runningPoll):
		}
	}
}

// subscribers follow one turn each over SSE.
type subscribers struct {
	wg     sync.WaitGroup
	events [][]sentEvent
	finals []string
	errs   []error
}

// subscribe opens a subscriber on the first turn of each of convs.
func (b *bencher) subscribe(ctx context.Context, base string, convs []string) *subscribers {
	client := &http.Client{Transport: &http.Transport{
		DialContext:        (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		DisableCompression: true,
		DisableKeepAlives:  true,
	}}
	s := &subscribers{events: make([][]sentEvent, len(convs)), finals: make([]string, len(convs)), errs: make([]error, len(convs))}
	sem := make(chan struct{}, connectParallelism)
	for i, conv := range convs {
		s.wg.Go(func() {
			sem <- struct{}{}
			up := sync.OnceFunc(func() { <-sem })
			defer up()
			s.finals[i], s.errs[i] = follow(ctx, client, base, conv, false, up, func(data []byte, at time.Time) {
				if ns, ok := summaryNanos(data); ok {
					sent := time.Unix(0, ns)
					s.events[i] = append(s.events[i], sentEvent{sent: sent, lat: at.Sub(sent)})
				}
			})
		})
	}
	return s
}

// wait waits for every stream to end.
func (s *subscribers) wait() { s.wg.Wait() }

// latencies returns the sorted delivery latencies of the events sent in
// [from, until), and of those sent from after on (none if after is zero).
func (s *subscribers) latencies(from, until, after time.Time) (in, later durations) {
	for _, evs := range s.events {
		for _, e := range evs {
			switch {
			case !after.IsZero() && !e.sent.Before(after):
				later = append(later, e.lat)
			case !e.sent.Before(from) && e.sent.Before(until):
				in = append(in, e.lat)
			}
		}
	}
	return in.sorted(), later.sorted()
}

// failed counts the streams that did not end with done, with the first
// one's error.
func (s *subscribers) failed() (int, error) {
	n := 0
	var first error
	for i, f := range s.finals {
		if s.errs[i] != nil || f != "done" {
			n++
			if first == nil {
				first = cmp.Or(s.errs[i], fmt.Errorf("the stream ended with %q", f))
			}
		}
	}
	return n, first
}

// beatLog reads a worker's heartbeat key every runningPoll and keeps the
// times of its beats, each the time of the read plus the TTL left minus
// the full TTL, so that they do not depend on when the bench looked.
type beatLog struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	beats []time.Time
	least []ttlAt   // TTL left at each read
	armed bool      // untilGone was called: the worker was killed
	gone  time.Time // when the key was found gone after that
	await chan struct{}
}

type ttlAt struct {
	at  time.Time
	ttl time.Duration
}

// watchHeartbeat starts reading the heartbeat of worker id.
func (b *bencher) watchHeartbeat(ctx context.Context, id string) *beatLog {
	ctx, cancel := context.WithCancel(ctx)
	l := &beatLog{cancel: cancel, done: make(chan struct{})}
	key := heartbeatKeyPrefix + id
	go func() {
		defer close(l.done)
		for ctx.Err() == nil {
			t0 := time.Now()
			ttl, err := b.rdb.PTTL(ctx, key).Result()
			t1 := time.Now()
			if err == nil {
				l.add(t0.Add(t1.Sub(t0)/2), ttl)
			}
			select {
			case <-ctx.Done():
			case <-time.After(runningPoll):
			}
		}
	}()
	return l
}

// add records one read: the key's TTL left at time at (negative: no key).
func (l *beatLog) add(at time.Time, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ttl <= 0 {
		if l.armed && l.gone.IsZero() {
			l.gone = at
			if l.await != nil {
				close(l.await)
				l.await = nil
			}
		}
		return
	}
	l.least = append(l.least, ttlAt{at, ttl})
	beat := at.Add(ttl - heartbeatTTL)
	// Two reads of one beat differ by the reads' jitter; beats are seconds
	// apart.
	if n := len(l.beats); n == 0 || beat.Sub(l.beats[n-1]) > heartbeatInterval/4 {
		l.beats = append(l.beats, beat)
	}
}

// gaps returns the sorted gaps between the beats that ended in [from,
// until], and the least TTL left read then.
func (l *beatLog) gaps(from, until time.Time) (durations, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var d durations
	for i := 1; i < len(l.beats); i++ {
		if !l.beats[i].Before(from) && !l.beats[i].After(until) {
			d = append(d, l.beats[i].Sub(l.beats[i-1]))
		}
	}
	least := heartbeatTTL
	for _, r := range l.least {
		if !r.at.Before(from) && !r.at.After(until) {
			least = min(least, r.ttl)
		}
	}
	return d.sorted(), least
}

// untilGone makes goneAt wait for the key to be found gone from now on.
func (l *beatLog) untilGone() {
	l.mu.Lock()
	l.armed = true
	l.await = make(chan struct{})
	l.mu.Unlock()
}

// goneAt returns when the key was found gone, waiting for it up to the
// TTL; zero if it was not.
func (l *beatLog) goneAt() time.Time {
	l.mu.Lock()
	wait := l.await
	l.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-l.done:
		case <-time.After(heartbeatTTL + time.Second):
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gone
}

// stop stops reading.
func (l *beatLog) stop() {
	l.cancel()
	<-l.done
}

// secs formats a duration in seconds.
func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
