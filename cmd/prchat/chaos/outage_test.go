//go:build chaos

package chaos

import (
	"fmt"
	"net/http"
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
	log := c.askAtRate(outageRate, time.Now().Add(outageBefore+outageFor+outageAfter), 1500*time.Millisecond)
	<-outage
	asks, accepted, polls := log.asks, log.accepted, log.polls

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
