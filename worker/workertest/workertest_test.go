package workertest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func TestRedisURLGivesEachCallItsOwnEmptyDatabase(t *testing.T) {
	t.Parallel()
	a, b := Client(t), Client(t)
	for _, c := range []*redis.Client{a, b} {
		if n, err := c.DBSize(t.Context()).Result(); err != nil || n != 0 {
			t.Fatalf("database %s holds %d keys (%v), want an empty one", c.Options().Addr, n, err)
		}
	}
	if err := a.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Exists(t.Context(), "k").Result(); err != nil || n != 0 {
		t.Errorf("a key written through one URL is seen through another (%d, %v)", n, err)
	}
}

func TestRedisURLFlushesOnCleanup(t *testing.T) {
	t.Parallel()
	if os.Getenv(EnvRedisURL) == "" {
		t.Skip("a miniredis ends with its test; set " + EnvRedisURL + " to test a shared server")
	}
	var opt *redis.Options
	t.Run("user", func(t *testing.T) {
		c := Client(t)
		opt = c.Options()
		if err := c.Set(t.Context(), "left-behind", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	})
	if opt.Addr == "" {
		t.Fatal("no client")
	}
	c := redis.NewClient(opt)
	defer c.Close()
	n, err := c.Exists(t.Context(), "left-behind").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Error("a key outlived the test that wrote it")
	}
}

func TestAcquireTakesAFreeDatabaseOrWaits(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	locks := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer locks.Close()
	ctx := t.Context()
	for db := firstDB; db <= lastDB; db++ {
		if db != 7 {
			locks.Set(ctx, lockKey(db), "other", 0)
		}
	}
	db, err := acquire(ctx, locks, "mine")
	if err != nil || db != 7 {
		t.Fatalf("acquire = %d, %v; want 7", db, err)
	}
	if v, _ := locks.Get(ctx, lockKey(7)).Result(); v != "mine" {
		t.Errorf("lock of database 7 holds %q, want our token", v)
	}

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if db, err := acquire(short, locks, "late"); err == nil {
		t.Fatalf("acquired database %d while all were taken", db)
	}

	// Released, a database goes to the next one waiting.
	go func() {
		// A while for acquire to wait, not a wait for a condition: a
		// release before it waits hands over the database the same.
		time.Sleep(100 * time.Millisecond)
		unlockScript.Run(context.Background(), locks, []string{lockKey(3)}, "other")
	}()
	if db, err := acquire(ctx, locks, "waiting"); err != nil || db != 3 {
		t.Errorf("acquire after a release = %d, %v; want 3", db, err)
	}
}
