package worker

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// TestEmbeddedRedisExpiresKeys: keys with a TTL expire on the real clock.
func TestEmbeddedRedisExpiresKeys(t *testing.T) {
	t.Parallel()
	e, err := StartEmbeddedRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rdb, err := OpenRedis(context.Background(), e.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Set(ctx, "short", "1", 300*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "long", "1", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for rdb.Exists(ctx, "short").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("a key with a 300ms TTL still exists after 3s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rdb.Exists(ctx, "long").Val() != 1 {
		t.Fatal("a key with an hour's TTL expired")
	}
	e.Close() // twice is safe
}

// TestEmbeddedRedisAnswersIdlePolls: an idle worker's polls of its empty
// queues are answered without running asynq's dequeue script, and jobs
// still run at once, also on a database other than 0.
func TestEmbeddedRedisAnswersIdlePolls(t *testing.T) {
	t.Parallel()
	for _, db := range []int{0, 3} {
		e, err := StartEmbeddedRedis()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close) // after the server's Stop, which is registered later
		rdb, err := OpenRedis(t.Context(), fmt.Sprintf("redis://%s/%d", e.Addr(), db))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		q, err := NewQueue(rdb, QueueConfig{Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		env := env{rdb: rdb, queue: q, hosts: NewHosts(rdb)}
		rec := newRecorder(nil)
		env.startServer(t, fmt.Sprintf("idle-%d", db), rec, nil)

		time.Sleep(200 * time.Millisecond)
		answered := e.idlePolls.Load()
		switch {
		case db == 0 && answered < 10:
			t.Fatalf("%d idle polls answered in 200ms at a 5ms interval; has asynq's dequeue script changed (dequeueScriptSHA)?", answered)
		case db != 0 && answered != 0:
			t.Fatalf("%d polls answered for a worker on database %d, whose lists the hook cannot see", answered, db)
		}
		for i := range 3 {
			turn := fmt.Sprintf("turn-%d", i)
			if err := q.Enqueue(t.Context(), turn, ""); err != nil {
				t.Fatal(err)
			}
			eventually(t, 2*time.Second, "db "+strconv.Itoa(db)+": "+turn+" runs", func() bool { return rec.count(turn) == 1 })
		}
	}
}
