package worker

import (
	"context"
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
