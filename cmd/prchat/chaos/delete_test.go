//go:build chaos

package chaos

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestDeleteRunning deletes conversations whose turns are running. Delete
// means gone: no worker keeps the run directory, the turn's job is not
// retried (its model is called once), and Redis keeps no job of it that
// never expires.
func TestDeleteRunning(t *testing.T) {
	c := newCluster(t, "delete", clusterConfig{})
	const trial = "DELETE of conversations with running turns"
	ts := c.mustAsk(4, 6*time.Second)
	c.waitRunning(t, trial, ts, 30*time.Second)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	ids := map[*turn]string{}
	for _, tr := range ts {
		var id string
		if err := conn.QueryRow(ctx, "SELECT id FROM turns WHERE conversation_id = $1 AND number = 1", tr.conv).Scan(&id); err != nil {
			t.Fatalf("turn id of %s: %v", tr.conv, err)
		}
		ids[tr] = id
	}
	for _, tr := range ts {
		if _, err := c.http.do("DELETE", c.apiURL()+"/api/v1/conversations/"+tr.conv, nil, http.StatusNoContent, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.http.do("GET", c.apiURL()+"/api/v1/conversations/"+tr.conv, nil, http.StatusNotFound, nil); err != nil {
			t.Errorf("%s: %v", trial, err)
		}
	}
	// Longer than a model call and than asynq's first retry delays.
	time.Sleep(6*time.Second + 5*time.Second)

	left := map[string]int{}
	for _, tr := range ts {
		if n := len(lab.model.Calls(tr.token)); n != 1 {
			left["model called again"]++
			t.Errorf("%s: the deleted turn of %s called the model %d times, want once: its job was retried", trial, tr.conv, n)
		}
		for _, w := range c.workers {
			dir := filepath.Join(c.dir, "data-"+w.name, "runs", tr.conv)
			if _, err := os.Stat(dir); err == nil {
				left["run directory kept"]++
				t.Errorf("%s: worker %s keeps the run directory of deleted conversation %s", trial, w.name, tr.conv)
			}
		}
		keys, err := c.redis.client.Keys(ctx, "asynq:*"+ids[tr]+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			ttl, err := c.redis.client.TTL(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if ttl < 0 {
				left["job kept without expiry"]++
				t.Errorf("%s: Redis keeps %s of the deleted turn of %s with no expiry", trial, k, tr.conv)
			}
		}
		for _, set := range []string{"retry", "archived", "pending", "active"} {
			sets, _ := c.redis.client.Keys(ctx, "asynq:{*}:"+set).Result()
			for _, s := range sets {
				var members []string
				if set == "pending" || set == "active" { // lists; retry and archived are sorted sets
					members, _ = c.redis.client.LRange(ctx, s, 0, -1).Result()
				} else {
					members, _ = c.redis.client.ZRange(ctx, s, 0, -1).Result()
				}
				if strings.Contains(strings.Join(members, " "), ids[tr]) {
					left["job "+set]++
					t.Errorf("%s: the job of the deleted turn of %s is in %s", trial, tr.conv, s)
				}
			}
		}
	}
	if n, err := c.pendingTurns(time.Now().Add(10 * time.Second)); err != nil || n > 0 {
		t.Errorf("%s: %d turns left pending (%v)", trial, n, err)
	}
	for _, v := range c.http.takeViolations() {
		t.Errorf("%s: %s", trial, v)
	}
	figure(t, "DELETE of %d conversations with running turns: left behind: %s", len(ts), countsOrNone(left))
}

func countsOrNone(m map[string]int) string {
	if len(m) == 0 {
		return "nothing"
	}
	return counts(m)
}
