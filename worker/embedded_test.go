package worker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prchat/prchat/chat/chattest"
	"github.com/redis/go-redis/v9"
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
	chattest.Eventually(t, "a key with a 300ms TTL to expire", func() bool { return rdb.Exists(ctx, "short").Val() == 0 })
	if rdb.Exists(ctx, "long").Val() != 1 {
		t.Fatal("a key with an hour's TTL expired")
	}
	e.Close() // twice is safe
}

// TestEmbeddedRedisAnswersIdlePolls: an idle worker's polls of its empty
// queues (and of its empty retry and scheduled sets) are answered without
// running asynq's scripts, and jobs still run at once, and are retried,
// also on a database other than 0. The worker on
// database 0 connects in memory (Client), as serve's does; the other by TCP.
func TestEmbeddedRedisAnswersIdlePolls(t *testing.T) {
	t.Parallel()
	for _, db := range []int{0, 3} {
		e, err := StartEmbeddedRedis()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close) // after the server's Stop, which is registered later
		var rdb redis.UniversalClient
		if db == 0 {
			rdb, err = e.Client(t.Context())
		} else {
			rdb, err = OpenRedis(t.Context(), fmt.Sprintf("redis://%s/%d", e.Addr(), db))
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		q, err := NewQueue(rdb, QueueConfig{Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		env := env{rdb: rdb, queue: q, hosts: NewHosts(rdb, HostsConfig{})}
		rec := newRecorder(func(_ context.Context, turnID string, n int) error {
			if turnID == "turn-retried" && n == 1 {
				return errBoom
			}
			return nil
		})
		s := env.startServer(t, fmt.Sprintf("idle-%d", db), rec, nil)

		// Forty polls of the two queues, at a 5ms interval: the forwarder,
		// every 50ms, ran too.
		chattest.Eventually(t, "forty polls of the idle worker", func() bool { polls, _ := s.poller.counts(); return polls >= 40 })
		if db == 0 {
			// Each poll and forward answered is counted: on a hook that
			// no longer recognises asynq's scripts, this gives up.
			chattest.Eventually(t, "the hook to answer ten idle polls and two forwards (has asynq's dequeue or forward script changed? dequeueScriptSHA, forwardScriptSHA)", func() bool {
				return e.idlePolls.Load() >= 10 && e.idleForwards.Load() >= 2
			})
		} else if answered, forwards := e.idlePolls.Load(), e.idleForwards.Load(); answered+forwards != 0 {
			t.Fatalf("%d polls and %d forwards answered for a worker on database %d, whose lists the hook cannot see", answered, forwards, db)
		}
		for i := range 3 {
			turn := fmt.Sprintf("turn-%d", i)
			if err := q.Enqueue(t.Context(), turn, ""); err != nil {
				t.Fatal(err)
			}
			chattest.Eventually(t, "db "+strconv.Itoa(db)+": "+turn+" runs", func() bool { return rec.count(turn) == 1 })
		}
		// A job in the retry set is forwarded by the script itself.
		if err := q.Enqueue(t.Context(), "turn-retried", ""); err != nil {
			t.Fatal(err)
		}
		chattest.Eventually(t, "db "+strconv.Itoa(db)+": turn-retried runs again", func() bool { return rec.count("turn-retried") == 2 })
	}
}

// TestEmbeddedRedisClient: a client on in-memory connections runs
// commands, a large pipeline and blocking reads, alongside a TCP client;
// after Close its commands fail instead of hanging, and Dial fails.
func TestEmbeddedRedisClient(t *testing.T) {
	t.Parallel()
	e, err := StartEmbeddedRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := t.Context()
	rdb, err := e.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	tcp, err := OpenRedis(ctx, e.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()

	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := tcp.Get(ctx, "k").Result(); got != "v" || err != nil {
		t.Fatalf("GET over TCP: %q, %v", got, err)
	}

	// A pipeline larger than any buffer: miniredis answers its head while
	// the client still writes its tail.
	const n = 2000
	value := strings.Repeat("x", 4096)
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			p.Set(ctx, "big:"+strconv.Itoa(i), value+strconv.Itoa(i), 0)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			p.Get(ctx, "big:"+strconv.Itoa(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cmds {
		if got := c.(*redis.StringCmd).Val(); got != value+strconv.Itoa(i) {
			t.Fatalf("GET big:%d returned %d bytes", i, len(got))
		}
	}

	// A blocking read times out with redis.Nil, and is woken by an XADD.
	start := time.Now()
	err = rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{"s", "$"}, Block: 200 * time.Millisecond}).Err()
	if !errors.Is(err, redis.Nil) {
		t.Fatalf("XREAD BLOCK 200ms on an empty stream: %v, want redis.Nil", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond { // a lower bound a loaded machine cannot break
		t.Fatalf("XREAD BLOCK 200ms returned after %v", d)
	}
	// An XADD every few milliseconds until the read returns: one comes
	// while it blocks, however late it began.
	read := make(chan struct{})
	go func() {
		for {
			select {
			case <-read:
				return
			case <-time.After(10 * time.Millisecond):
				_ = tcp.XAdd(ctx, &redis.XAddArgs{Stream: "s", Values: []string{"f", "v"}}).Err()
			}
		}
	}()
	streams, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{"s", "$"}, Block: chattest.Patience()}).Result()
	close(read)
	if err != nil || len(streams) != 1 || len(streams[0].Messages) != 1 {
		t.Fatalf("XREAD BLOCK woken by XADD: %v, %v", streams, err)
	}

	e.Close()
	if _, err := e.Dial(ctx, "tcp", e.Addr()); err == nil {
		t.Fatal("Dial after Close succeeded")
	}
	done := make(chan error, 1)
	go func() { done <- rdb.Get(ctx, "k").Err() }()
	if err := chattest.Receive(t, "GET after Close to return", done); err == nil {
		t.Fatal("GET after Close succeeded")
	}
}
