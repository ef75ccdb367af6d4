//go:build chaos

package chaos

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"
)

const (
	outageRate   = 20 // asks a second
	outageBefore = 5 * time.Second
	outageFor    = 10 * time.Second
	outageAfter  = 10 * time.Second
)

// TestDatabaseOutage stops the suite's Postgres for 10 s while clients ask
// 20 questions a second and poll the turns they were given. While it is
// down the API must refuse with 503 unavailable (never 500), and every
// question it accepted, before, during or after, must be answered once:
// the workers wait the outage out instead of failing their turns.
func TestDatabaseOutage(t *testing.T) {
	c := newCluster(t, "outage", clusterConfig{concurrency: 16})

	type ask struct {
		at     time.Time
		status int // 0: no answer
		turn   *turn
	}
	var (
		mu       sync.Mutex
		asks     []ask
		accepted []*turn
		polls    = map[string]int{}
		wg       sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(outageBefore + outageFor + outageAfter)
	var downAt, upAt time.Time
	outage := make(chan struct{})
	go func() {
		defer close(outage)
		time.Sleep(outageBefore)
		downAt = time.Now()
		lab.pg.stop()
		time.Sleep(outageFor - time.Since(downAt))
		if err := lab.pg.start(); err != nil {
			t.Errorf("start postgres again: %v", err)
		}
		upAt = time.Now()
	}()
	tick := time.NewTicker(time.Second / outageRate)
	for now := range tick.C {
		if now.After(end) {
			break
		}
		wg.Go(func() {
			tr, status, _ := c.ask(1500 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			asks = append(asks, ask{at: now, status: status, turn: tr})
			if tr != nil {
				accepted = append(accepted, tr)
			}
		})
		// A poll of a turn asked earlier, as a waiting client does.
		mu.Lock()
		var tr *turn
		if len(accepted) > 0 {
			tr = accepted[rand.IntN(len(accepted))]
		}
		mu.Unlock()
		if tr != nil {
			wg.Go(func() {
				status, _ := c.http.do("GET", c.turnURL(tr), nil, http.StatusOK, nil)
				mu.Lock()
				polls[fmt.Sprint(status)]++
				mu.Unlock()
			})
		}
	}
	tick.Stop()
	wg.Wait()
	<-outage

	c.settle(accepted, time.Now().Add(2*time.Minute))
	c.verify(t, "Postgres stopped for 10s", accepted)

	during := map[string]int{}
	var recovered time.Duration = -1
	for _, a := range asks {
		if !a.at.Before(downAt) && a.at.Before(upAt) {
			during[fmt.Sprint(a.status)]++
		}
		if a.status == http.StatusAccepted && !a.at.Before(upAt) && (recovered < 0 || a.at.Sub(upAt) < recovered) {
			recovered = a.at.Sub(upAt)
		}
	}
	var hit int
	var caughtUp time.Duration
	for _, tr := range accepted {
		if tr.acceptedAt.Before(downAt) && (tr.final.FinishedAt == nil || tr.final.FinishedAt.After(downAt)) {
			hit++
			if tr.final.FinishedAt != nil {
				caughtUp = max(caughtUp, tr.final.FinishedAt.Sub(upAt))
			}
		}
	}
	failed := len(accepted) - succeeded(accepted)
	figure(t, "Postgres stopped for %s under %d asks/s: %d asks, %d accepted, %d of them queued or running when it stopped; %d accepted turns not answered; asks while down by status: %s; polls by status: %s; back up → first ask accepted %s, → the last turn it caught settled %s",
		upAt.Sub(downAt).Round(100*time.Millisecond), outageRate, len(asks), len(accepted), hit, failed, counts(during), counts(polls), recovered.Round(10*time.Millisecond), caughtUp.Round(10*time.Millisecond))
	if recovered < 0 {
		t.Errorf("no ask was accepted after Postgres came back")
	}
}
