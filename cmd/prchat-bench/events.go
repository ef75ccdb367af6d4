package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The events phase's shape: a fixed number of turns, each followed by an
// equal share of the subscribers, emit events at a fixed pace, so that
// every subscriber gets the same events per second whatever their count
// and the phase measures the hub (how many subscribers one API process
// holds and fans out to) rather than how fast two cores can write.
const (
	// eventsTurns is how many turns the events phase runs (at most
	// --concurrency).
	eventsTurns = 4
	// eventsPerTurn and eventsInterval are the tool_result events each
	// turn emits, and their spacing: each subscriber gets one event per
	// eventsInterval. The turns start eventsInterval/eventsTurns apart, so
	// that the deliveries are spread evenly.
	eventsPerTurn  = 20
	eventsInterval = 500 * time.Millisecond
	// connectParallelism bounds the subscriptions being opened at once.
	connectParallelism = 32
	// eventsIdle is how long the connected subscribers are left idle
	// before the idle figures are read.
	eventsIdle = time.Second
	// subscriberKB is the goal for the API's idle RSS per subscriber, set
	// from memoryGoalFrom subscribers on: with fewer, the process's own
	// growth (a heap arena, the runtime's caches) is most of the change,
	// which says nothing of what a subscriber holds.
	subscriberKB   = 24
	memoryGoalFrom = 2000
)

// eventsHold is how long the turns of the events phase wait before their
// first event: long enough for n subscribers to connect on a busy machine
// and to read the idle figures.
func eventsHold(n int) time.Duration {
	return min(3*time.Second+time.Duration(n)*2*time.Millisecond, 60*time.Second)
}

// goStats reads the Go runtime gauges of d's /metrics.
func (b *bencher) goStats(ctx context.Context, d *benchDaemon) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read metrics: HTTP %d", resp.StatusCode)
	}
	want := map[string]bool{"go_goroutines": true, "go_memstats_heap_inuse_bytes": true, "go_memstats_stack_inuse_bytes": true}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			out[name] = v
		}
	}
	if len(out) != len(want) {
		return nil, fmt.Errorf("read metrics: %d of the %d Go gauges found", len(out), len(want))
	}
	return out, sc.Err()
}

// subscriberLog is what one subscriber of the events phase saw.
type subscriberLog struct {
	lat       durations
	firstSent int64     // Unix ns the first event it got was sent
	lastRead  time.Time // when it read its last event
	final     string
	err       error
}

// events opens n subscribers on the API process api, spread evenly over
// eventsTurns turns that emit timestamped events, and measures the idle
// memory per subscriber (all connected, before the first event), the
// delivery latency (receive time minus the send time the bench agent
// writes in each tool_result's summary) and the API process's CPU per
// delivered event.
func (b *bencher) events(ctx context.Context, api *benchDaemon, n int) error {
	k := min(eventsTurns, n, b.cfg.Concurrency)
	hold := eventsHold(n)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.cfg.Settle / 3): // let the fresh daemon settle
	}
	before, rssErr := api.rss()
	goBefore, goErr := b.goStats(ctx, api)

	convs := make([]string, k)
	// The first event of turn 0 goes out hold from now, turn i's i/k of
	// an interval after it: on the bench's clock, not from when each turn
	// started running.
	first := time.Now().Add(hold)
	for i := range convs {
		at := first.Add(time.Duration(i) * eventsInterval / time.Duration(k))
		body := askBody(fmt.Sprintf("events=%d interval=%s start=%d", eventsPerTurn, eventsInterval, at.UnixNano()))
		var err error
		if convs[i], err = b.ask(ctx, api.url, body, true); err != nil {
			return fmt.Errorf("events: %w", err)
		}
	}
	askedAt := first.Add(-hold)

	client := &http.Client{Transport: &http.Transport{
		DialContext:        (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		DisableCompression: true,
		DisableKeepAlives:  true,
	}}
	defer client.CloseIdleConnections()
	sctx, cancel := context.WithTimeout(ctx, hold+eventsPerTurn*eventsInterval+2*time.Minute)
	defer cancel()
	logs := make([]subscriberLog, n)
	sem := make(chan struct{}, connectParallelism)
	var connected, done sync.WaitGroup
	connected.Add(n)
	for i := range n {
		done.Go(func() {
			sem <- struct{}{}
			up := sync.OnceFunc(func() { <-sem; connected.Done() })
			defer up()
			l := &logs[i]
			l.final, l.err = follow(sctx, client, api.url, convs[i%k], true, up, func(data []byte, at time.Time) {
				if ns, ok := summaryNanos(data); ok {
					if l.lat == nil {
						l.lat = make(durations, 0, eventsPerTurn)
						l.firstSent = ns
					}
					l.lat = append(l.lat, time.Duration(at.UnixNano()-ns))
					l.lastRead = at
				}
			})
		})
	}
	connected.Wait()
	connectedAt := time.Now()
	// Idle: every subscriber connected, the turns still holding.
	select {
	case <-sctx.Done():
	case <-time.After(eventsIdle):
	}
	idleAt := time.Now()
	idle, rssErr2 := api.rss()
	goIdle, goErr2 := b.goStats(ctx, api)
	// The CPU of the deliveries: from just before the first event.
	select {
	case <-sctx.Done():
	case <-time.After(time.Until(askedAt.Add(hold - 50*time.Millisecond))):
	}
	cpuStart, cpuErr := api.cpu()
	done.Wait()
	cpuAfter, cpuErr2 := api.cpu()

	var all durations
	var failed int
	var firstErr error
	var firstSent int64
	var lastRead time.Time
	for i := range logs {
		l := &logs[i]
		all = append(all, l.lat...)
		if len(l.lat) > 0 {
			if firstSent == 0 || l.firstSent < firstSent {
				firstSent = l.firstSent
			}
			if l.lastRead.After(lastRead) {
				lastRead = l.lastRead
			}
		}
		if l.err != nil || l.final != "done" {
			failed++
			if firstErr == nil {
				firstErr = l.err
				if firstErr == nil {
					firstErr = fmt.Errorf("the stream ended with %q", l.final)
				}
			}
		}
	}
	all = all.sorted()
	turns := "turns"
	if k == 1 {
		turns = "turn"
	}
	offered := float64(n) / eventsInterval.Seconds()
	what := fmt.Sprintf("%d subscribers on %d %s, %.0f events/s asked: delivery p50 / p99", n, k, turns, offered)
	b.rep.add("events", what, all.p50p99(), "p99 < 100 ms", verdict(len(all) > 0 && all.percentile(99) < 100*time.Millisecond))
	if len(all) > 0 && firstSent > 0 {
		span := lastRead.Sub(time.Unix(0, firstSent))
		b.rep.add("events", "  events delivered per second", fmt.Sprintf("%.0f /s", float64(len(all))/span.Seconds()), "", "")
	}
	if rssErr == nil && rssErr2 == nil {
		per := float64(idle-before) / float64(n) / 1024
		goal, ok := "", ""
		if n >= memoryGoalFrom {
			goal, ok = fmt.Sprintf("≤ %d KB", subscriberKB), verdict(per <= subscriberKB)
		}
		b.rep.add("events", fmt.Sprintf("  idle: %s RSS per subscriber", api.name), fmt.Sprintf("%.1f KB", per), goal, ok)
	}
	if goErr == nil && goErr2 == nil {
		per := func(k string) float64 { return (goIdle[k] - goBefore[k]) / float64(n) }
		b.rep.add("events", "  idle: of which Go heap in use / stacks, per subscriber",
			fmt.Sprintf("%.1f KB / %.1f KB", per("go_memstats_heap_inuse_bytes")/1024, per("go_memstats_stack_inuse_bytes")/1024), "", "")
		b.rep.add("events", "  idle: goroutines per subscriber", fmt.Sprintf("%.1f", per("go_goroutines")), "", "")
	}
	if cpuErr == nil && cpuErr2 == nil && len(all) > 0 {
		b.rep.add("events", fmt.Sprintf("  %s CPU per delivered event", api.name),
			fmt.Sprintf("%.1f µs", float64((cpuAfter-cpuStart).Nanoseconds())/1e3/float64(len(all))), "", "")
	}
	if want := n * eventsPerTurn; len(all) != want {
		b.rep.note(fmt.Sprintf("events (%d subscribers): %d of %d tool_result events received", n, len(all), want))
	}
	if failed > 0 {
		b.rep.note(fmt.Sprintf("events (%d subscribers): %d streams did not end with done; first: %v", n, failed, firstErr))
	}
	if idleAt.After(askedAt.Add(hold)) {
		b.rep.note(fmt.Sprintf("events (%d subscribers): the subscribers were connected %s after the asks and the idle figures read %s after, past the turns' hold of %s: they include events, and the CPU figure subscribing",
			n, connectedAt.Sub(askedAt).Round(time.Millisecond), idleAt.Sub(askedAt).Round(time.Millisecond), hold))
	}
	if n == b.cfg.Subscribers[0] {
		b.rep.note(fmt.Sprintf("events: %d turns (at most --concurrency), each followed by 1/%d of the subscribers, wait 3 s + 2 ms per subscriber for them to connect, then emit %d tool_result events %s apart, the turns %s apart, on the bench's clock (no turn drifts into another by what its emits cost): every subscriber gets %.0f events/s whatever their count (the figure asked is subscribers × that); "+
			"idle figures are read %s after the last subscriber connected, before the first event, against the fresh API process (RSS per subscriber is held to its goal from %d subscribers on: below that the process's own growth is most of the change); latency is the time the bench read an event minus the send time the agent wrote in it; CPU per delivered event is the API process's CPU from just before the first event to the last done event over the events delivered",
			k, k, eventsPerTurn, eventsInterval, eventsInterval/time.Duration(k), 1/eventsInterval.Seconds(), eventsIdle, memoryGoalFrom))
	}
	return nil
}
