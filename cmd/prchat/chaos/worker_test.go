//go:build chaos

package chaos

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// killClusters × killWaves is how many times a worker running turns is
	// killed; the clusters run side by side.
	killClusters = 4
	killWaves    = 5
	// stallWaves is how many times a worker running turns is stopped
	// (SIGSTOP) until its turns were taken over, then woken (SIGCONT).
	stallWaves = 3
	// waveTurns is how many turns are running when a worker is hit.
	waveTurns = 4
	// waveDelay is how long the model takes to answer a turn.
	waveDelay = 4 * time.Second
	// takeoverBound is the longest a crashed worker's turn may wait to be
	// run again: the heartbeat's TTL and a reconcile pass with room for a
	// loaded machine, far below asynq's own 60–120 s recovery.
	takeoverBound = 40 * time.Second
)

// crashFigures gathers the distributions of the crash trials.
type crashFigures struct {
	mu       sync.Mutex
	rerun    []time.Duration // fault → the turn's next model call
	settled  []time.Duration // fault → the turn settled
	trials   int
	hitTurns int
}

func (f *crashFigures) add(rerun, settled time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rerun = append(f.rerun, rerun)
	f.settled = append(f.settled, settled)
}

// TestWorkerCrash kills (SIGKILL) the worker that runs turns, killClusters
// × killWaves times, and stalls one (SIGSTOP, then SIGCONT once its turns
// were taken over) stallWaves times. Every turn must be answered once: a
// killed worker's turns run again on the other worker, a stalled one's
// woken run is fenced off and changes nothing.
func TestWorkerCrash(t *testing.T) {
	var kills, stalls crashFigures
	// The clusters run side by side: t.Run from goroutines, so that
	// go test's -parallel (GOMAXPROCS by default) does not queue them.
	var wg sync.WaitGroup
	for i := range killClusters {
		wg.Go(func() {
			name := fmt.Sprintf("kill%d", i+1)
			t.Run(name, func(t *testing.T) {
				c := newCluster(t, name, clusterConfig{})
				for w := range killWaves {
					crashWave(t, c, fmt.Sprintf("kill %d.%d", i+1, w+1), syscall.SIGKILL, &kills)
				}
			})
		})
	}
	wg.Go(func() {
		t.Run("stall", func(t *testing.T) {
			c := newCluster(t, "stall", clusterConfig{})
			for w := range stallWaves {
				crashWave(t, c, fmt.Sprintf("stall %d", w+1), syscall.SIGSTOP, &stalls)
			}
		})
	})
	wg.Wait()
	figure(t, "SIGKILL of a worker running turns: %d trials, %d turns hit; kill → re-run %s; kill → settled %s",
		kills.trials, kills.hitTurns, dist(kills.rerun), dist(kills.settled))
	figure(t, "SIGSTOP of a worker running turns: %d trials, %d turns hit; stop → re-run %s; stop → settled %s",
		stalls.trials, stalls.hitTurns, dist(stalls.rerun), dist(stalls.settled))
	if kills.trials < killClusters*killWaves {
		t.Errorf("only %d of %d kill trials ran", kills.trials, killClusters*killWaves)
	}
}

// crashWave runs one trial: waveTurns turns running, the worker running
// most of them hit with sig (SIGKILL, or SIGSTOP and SIGCONT once its
// turns were taken over), every turn settled and checked.
func crashWave(t *testing.T, c *cluster, trial string, sig syscall.Signal, figs *crashFigures) {
	ts := c.mustAsk(waveTurns, waveDelay)
	c.waitRunning(t, trial, ts, 30*time.Second)
	// The victim is the worker that made most of the first calls.
	byKey := map[string]int{}
	first := map[*turn]string{}
	for _, tr := range ts {
		k := lab.model.Calls(tr.token)[0].Key
		byKey[k]++
		first[tr] = k
	}
	victim := c.workers[0]
	if byKey[c.workers[1].key] > byKey[victim.key] {
		victim = c.workers[1]
	}
	hitAt := time.Now()
	victim.signal(sig)
	if sig == syscall.SIGKILL {
		if _, ok := victim.wait(10 * time.Second); !ok {
			t.Fatalf("%s: the worker did not die of SIGKILL", trial)
		}
	}
	var hit []*turn
	for _, tr := range ts {
		if first[tr] == victim.key {
			hit = append(hit, tr)
		}
	}
	var beforeWake map[*turn]int
	if sig == syscall.SIGSTOP {
		// Wait for the stalled worker's turns to be taken over and
		// settled, then wake it: its runs must be fenced off.
		c.settle(hit, time.Now().Add(takeoverBound+2*waveDelay))
		beforeWake = map[*turn]int{}
		for _, tr := range hit {
			beforeWake[tr] = transcriptLen(c, tr)
		}
		victim.signal(syscall.SIGCONT)
		time.Sleep(waveDelay + time.Second) // its model calls end, it tries to store them
	}
	c.settle(ts, time.Now().Add(takeoverBound+3*waveDelay))
	c.verify(t, trial, ts)

	figs.mu.Lock()
	figs.trials++
	figs.hitTurns += len(hit)
	figs.mu.Unlock()
	for _, tr := range ts {
		calls := lab.model.Calls(tr.token)
		if first[tr] != victim.key {
			if len(calls) != 1 {
				t.Errorf("%s: turn %s of the worker left alone made %d model calls, want 1", trial, tr.conv, len(calls))
			}
			continue
		}
		switch {
		case len(calls) < 2:
			t.Errorf("%s: turn %s of the hit worker was not run again (%d model calls)", trial, tr.conv, len(calls))
			continue
		case len(calls) > 2:
			t.Errorf("%s: turn %s of the hit worker made %d model calls, want 2: a takeover was wasted", trial, tr.conv, len(calls))
		}
		if calls[1].Key == victim.key && sig == syscall.SIGSTOP {
			t.Errorf("%s: turn %s was run again by the stalled worker", trial, tr.conv)
		}
		rerun := calls[1].At.Sub(hitAt)
		if rerun > takeoverBound {
			t.Errorf("%s: turn %s ran again %s after the fault, want within %s", trial, tr.conv, rerun.Round(time.Millisecond), takeoverBound)
		}
		var settled time.Duration
		if tr.final.FinishedAt != nil {
			settled = tr.final.FinishedAt.Sub(hitAt)
		}
		figs.add(rerun, settled)
		if beforeWake != nil {
			if n := transcriptLen(c, tr); n != beforeWake[tr] {
				t.Errorf("%s: turn %s's transcript went from %d to %d events after the stalled worker woke", trial, tr.conv, beforeWake[tr], n)
			}
		}
	}
	if sig == syscall.SIGKILL {
		c.start(victim)
	}
}

// transcriptLen returns how many events tr's transcript holds (-1: unread).
func transcriptLen(c *cluster, tr *turn) int {
	var tx struct {
		Events []any `json:"events"`
	}
	if _, err := c.http.do("GET", c.turnURL(tr)+"/transcript", nil, 200, &tx); err != nil {
		return -1
	}
	return len(tx.Events)
}
