//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestAPIStop stops (SIGTERM) one of two APIs while 20 SSE subscribers
// follow 10 running turns through it and two follow the repository's feed.
// Each stream must end with the turn's final event or a reconnect hint,
// never bare (a feed, which has no final event: with a hint); each turn's
// subscriber then reconnects to the other API with Last-Event-ID and must
// get the rest of its turn's events, nothing twice, ending with done.
func TestAPIStop(t *testing.T) {
	c := newCluster(t, "apistop", clusterConfig{apis: 2, concurrency: 8})
	ts := c.mustAsk(10, 6*time.Second)
	c.waitRunning(t, "SIGTERM of api", ts, 30*time.Second)
	api1, api2 := c.apis[0], c.apis[1]

	type sub struct {
		tr     *turn
		first  []sseFrame
		second []sseFrame
		err    error
	}
	subs := make([]*sub, 0, 2*len(ts))
	for _, tr := range ts {
		subs = append(subs, &sub{tr: tr}, &sub{tr: tr})
	}
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	for _, s := range subs {
		ready.Add(1)
		wg.Go(func() {
			once := sync.OnceFunc(ready.Done)
			defer once()
			url := fmt.Sprintf("http://%s/api/v1/conversations/%s/turns/1/events", api1.listen, s.tr.conv)
			s.first, s.err = c.http.stream(context.Background(), url, "", func(f sseFrame) {
				if f.Data != "" && !f.Comment {
					once()
				}
			})
		})
	}
	// Two dashboards follow the repository's feed, which has no final
	// event: a stopping API owes them a reconnect hint.
	feeds := make([][]sseFrame, 2)
	for i := range feeds {
		ready.Add(1)
		wg.Go(func() {
			once := sync.OnceFunc(ready.Done)
			defer once()
			url := fmt.Sprintf("http://%s/api/v1/repos/acme/chaos/events", api1.listen)
			feeds[i], _ = c.http.stream(context.Background(), url, "", func(sseFrame) { once() })
		})
	}
	ready.Wait() // every subscriber has had its first event (a feed: its first frame)
	stopAt := time.Now()
	api1.signal(syscall.SIGTERM)
	exitAt, ok := api1.wait(30 * time.Second)
	if !ok {
		t.Fatalf("api did not exit within 30s of SIGTERM")
	}
	wg.Wait()

	ended := map[string]int{}
	for i, f := range feeds {
		how := streamEnd(f)
		ended["feed "+how]++
		if how != "reconnect hint" {
			t.Errorf("SIGTERM of api: feed stream %d closed without a reconnect hint (last frame %+v)", i+1, lastFrame(f))
		}
	}
	for _, s := range subs {
		how := streamEnd(s.first)
		ended[how]++
		if how == "closed bare" {
			t.Errorf("SIGTERM of api: the stream of %s closed with neither a final event nor a reconnect hint (last frame %+v)", s.tr.conv, lastFrame(s.first))
		}
		if how == "final event" {
			continue
		}
		wg.Go(func() {
			url := fmt.Sprintf("http://%s/api/v1/conversations/%s/turns/1/events", api2.listen, s.tr.conv)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s.second, s.err = c.http.stream(ctx, url, lastID(s.first), nil)
		})
	}
	wg.Wait()
	for _, s := range subs {
		evs := events(append(append([]sseFrame{}, s.first...), s.second...))
		last := int64(0)
		for _, e := range evs {
			seq, err := strconv.ParseInt(e.ID, 10, 64)
			if err != nil {
				continue // a hint without an id
			}
			if seq <= last {
				t.Errorf("SIGTERM of api: %s's events across the reconnect: id %d after %d", s.tr.conv, seq, last)
			}
			last = seq
		}
		if ty := lastType(evs); ty != "done" {
			t.Errorf("SIGTERM of api: %s's events across the reconnect end with %q, want done (err %v)", s.tr.conv, ty, s.err)
		}
	}
	c.settle(ts, time.Now().Add(time.Minute))
	c.verify(t, "SIGTERM of api", ts)
	figure(t, "SIGTERM of an api with %d SSE subscribers on running turns and %d on the repository feed: streams ended by %s; SIGTERM → exit %s",
		len(subs), len(feeds), counts(ended), exitAt.Sub(stopAt).Round(10*time.Millisecond))
}

// streamEnd says how a stream cut by a stopping API ended: with the
// turn's final event, with a reconnect hint (a retry field, a
// ": reconnect" comment or a "reconnect" event after the stream's first
// frame), or bare.
func streamEnd(frames []sseFrame) string {
	evs := events(frames)
	if ty := lastType(evs); ty == "done" || ty == "error" {
		return "final event"
	}
	for i := len(frames) - 1; i >= 1; i-- {
		f := frames[i]
		if f.Comment && strings.HasPrefix(f.Data, "reconnect") {
			return "reconnect hint"
		}
		if f.Comment {
			continue
		}
		if f.Retry != "" || f.Event == "reconnect" || f.eventType() == "reconnect" {
			return "reconnect hint"
		}
		break
	}
	return "closed bare"
}

func lastFrame(frames []sseFrame) sseFrame {
	if len(frames) == 0 {
		return sseFrame{}
	}
	return frames[len(frames)-1]
}

// lastID returns the id of the last event among frames.
func lastID(frames []sseFrame) string {
	id := ""
	for _, f := range frames {
		if f.ID != "" {
			id = f.ID
		}
	}
	return id
}

const (
	// stopGrace is the workers' PRCHAT_SHUTDOWN_GRACE in TestWorkerStop.
	stopGrace = 5 * time.Second
	// stopDelay is how long its turns take: longer than the grace (and
	// than the 10 s a worker waits without the setting).
	stopDelay = 12 * time.Second
	// handOffBound is how soon after the stopped worker exits its turns
	// must run again elsewhere: at once, not after the heartbeat's 15 s.
	handOffBound = 5 * time.Second
)

// TestWorkerStop stops (SIGTERM) the worker that runs turns longer than
// its shutdown grace. It must stop within the grace and hand the turns
// still running to the other worker at once, each answered once; a second
// SIGTERM must stop it at once.
func TestWorkerStop(t *testing.T) {
	c := newCluster(t, "workerstop", clusterConfig{grace: stopGrace})
	var exits, handoffs []time.Duration
	for _, signals := range []int{1, 2} {
		trial := fmt.Sprintf("SIGTERM ×%d of a worker", signals)
		ts := c.mustAsk(4, stopDelay)
		c.waitRunning(t, trial, ts, 30*time.Second)
		time.Sleep(500 * time.Millisecond)
		first := map[*turn]string{}
		byKey := map[string]int{}
		for _, tr := range ts {
			k := lab.model.Calls(tr.token)[0].Key
			first[tr] = k
			byKey[k]++
		}
		victim := c.workers[0]
		if byKey[c.workers[1].key] > byKey[victim.key] {
			victim = c.workers[1]
		}
		stopAt := time.Now()
		victim.signal(syscall.SIGTERM)
		if signals == 2 {
			time.Sleep(200 * time.Millisecond)
			victim.signal(syscall.SIGTERM)
		}
		exitAt, ok := victim.wait(stopDelay + 30*time.Second)
		if !ok {
			t.Fatalf("%s: the worker did not exit", trial)
		}
		took := exitAt.Sub(stopAt)
		exits = append(exits, took)
		bound := stopGrace + 3*time.Second
		if signals == 2 {
			bound = 2 * time.Second
		}
		if took > bound {
			t.Errorf("%s: the worker took %s to exit, want at most %s", trial, took.Round(10*time.Millisecond), bound)
		}
		c.settle(ts, time.Now().Add(takeoverBound+2*stopDelay))
		c.verify(t, trial, ts)
		for _, tr := range ts {
			calls := lab.model.Calls(tr.token)
			if first[tr] != victim.key {
				if len(calls) != 1 {
					t.Errorf("%s: turn %s of the other worker made %d model calls, want 1", trial, tr.conv, len(calls))
				}
				continue
			}
			if len(calls) < 2 {
				t.Errorf("%s: turn %s of the stopped worker was not run again (%d model calls)", trial, tr.conv, len(calls))
				continue
			}
			if len(calls) > 2 {
				t.Errorf("%s: turn %s of the stopped worker made %d model calls, want 2", trial, tr.conv, len(calls))
			}
			h := calls[1].At.Sub(exitAt)
			handoffs = append(handoffs, h)
			if h > handOffBound {
				t.Errorf("%s: turn %s ran again %s after its worker exited, want within %s (handed on at once)", trial, tr.conv, h.Round(10*time.Millisecond), handOffBound)
			}
		}
		c.start(victim)
	}
	figure(t, "SIGTERM of a worker with turns of %s, grace %s: SIGTERM → exit %v (once, twice); exit → turn run again %s",
		stopDelay, stopGrace, roundAll(exits), dist(handoffs))
}

func roundAll(ds []time.Duration) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Round(10*time.Millisecond).String())
	}
	return out
}
