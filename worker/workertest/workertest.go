// Package workertest gives tests a Redis of their own: a database of the
// server named by PRCHAT_TEST_REDIS_URL when it is set, else an in-process
// miniredis.
package workertest

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/redis/go-redis/v9"
)

// EnvRedisURL names the environment variable with the URL of a Redis server
// for tests, e.g. redis://127.0.0.1:6379/0. Database 0 of that server holds
// the locks; the tests use databases 1 to 13 and flush them. Databases 14
// and 15 are left to a bench run by hand beside the tests (prchat-bench
// --redis-url redis://127.0.0.1:6379/14), which a test must not flush.
const EnvRedisURL = "PRCHAT_TEST_REDIS_URL"

const (
	firstDB = 1
	lastDB  = 13
	lockTTL = 10 * time.Minute
	// waitForDB is how long RedisURL waits for a free database.
	waitForDB = 3 * time.Minute
)

func lockKey(db int) string { return "prchat:test:db:" + strconv.Itoa(db) }

// unlockScript deletes KEYS[1] if it holds ARGV[1].
var unlockScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// RedisURL returns the URL of an empty Redis database that only this test
// uses until it ends.
//
// With PRCHAT_TEST_REDIS_URL set, it takes one of the databases 1-13 of that
// server, locked against other tests and test processes by the key
// prchat:test:db:<n> in database 0 (SET NX with a 10 minute expiry, so a
// crashed test frees it in time). It waits while all are taken. The
// database is flushed before use and in t.Cleanup, and then released.
// Otherwise it starts a miniredis for the test, whose key TTLs follow the
// real clock.
func RedisURL(t testing.TB) string {
	t.Helper()
	raw := os.Getenv(EnvRedisURL)
	if raw == "" {
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true)
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			t.Fatalf("start miniredis: %v", err)
		}
		t.Cleanup(m.Close)
		return "redis://" + m.Addr() + "/0"
	}
	return lockDB(t, raw)
}

// Client returns a client of RedisURL(t), closed when the test ends.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	return Connect(t, RedisURL(t))
}

// Connect returns a client of the Redis at rawURL (one RedisURL returned),
// closed when the test ends.
func Connect(t testing.TB, rawURL string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatalf("parse test redis url: %v", err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func lockDB(t testing.TB, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", EnvRedisURL, err)
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatalf("%s %s: %v", EnvRedisURL, u.Redacted(), err)
	}
	lockOpt := *opt
	lockOpt.DB = 0
	locks := redis.NewClient(&lockOpt)

	ctx, cancel := context.WithTimeout(context.Background(), chattest.Within(waitForDB))
	defer cancel()
	token := newToken()
	db, err := acquire(ctx, locks, token)
	if err != nil {
		_ = locks.Close()
		t.Fatalf("get a test database on %s: %v", u.Redacted(), err)
	}

	opt.DB = db
	c := redis.NewClient(opt)
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.FlushDB(ctx).Err(); err != nil {
			t.Errorf("flush test database %d: %v", db, err)
		}
		_ = c.Close()
		defer locks.Close()
		if err := unlockScript.Run(ctx, locks, []string{lockKey(db)}, token).Err(); err != nil {
			t.Errorf("release test database %d: %v", db, err)
		}
	}
	if err := c.FlushDB(ctx).Err(); err != nil {
		release()
		t.Fatalf("flush test database %d: %v", db, err)
	}
	t.Cleanup(release)

	q := u.Query()
	q.Del("db")
	u.RawQuery = q.Encode()
	u.Path = "/" + strconv.Itoa(db)
	return u.String()
}

// acquire locks a free database, trying them from a random one on, and
// waits while all are taken.
func acquire(ctx context.Context, locks *redis.Client, token string) (int, error) {
	n := lastDB - firstDB + 1
	for {
		start := rand.IntN(n)
		for i := range n {
			db := firstDB + (start+i)%n
			ok, err := locks.SetNX(ctx, lockKey(db), token, lockTTL).Result()
			if err != nil {
				return 0, fmt.Errorf("lock database %d: %w", db, err)
			}
			if ok {
				return db, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, errors.New("all test databases stayed taken")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func newToken() string {
	var b [12]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
