package worker

import (
	"net/url"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/redis/go-redis/v9"
)

func TestNewRedisClient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url      string
		addr     string
		db       int
		password string
		tls      bool
	}{
		{url: "redis://127.0.0.1:6379/0", addr: "127.0.0.1:6379"},
		{url: "redis://:s3cret@redis.internal:6380/4", addr: "redis.internal:6380", db: 4, password: "s3cret"},
		{url: "rediss://user:pw@redis.example:6379/2", addr: "redis.example:6379", db: 2, password: "pw", tls: true},
	} {
		c, err := NewRedisClient(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		opt := c.(*redis.Client).Options()
		if opt.Addr != tc.addr || opt.DB != tc.db || opt.Password != tc.password || (opt.TLSConfig != nil) != tc.tls {
			t.Errorf("%s: addr %s db %d password %q tls %v; want %s %d %q %v",
				tc.url, opt.Addr, opt.DB, opt.Password, opt.TLSConfig != nil, tc.addr, tc.db, tc.password, tc.tls)
		}
		_ = c.Close()
	}
	for _, tc := range []struct {
		url  string
		want redis.FailoverOptions
	}{
		{url: "redis-sentinel://10.0.0.1:26379?master=mymaster", want: redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{"10.0.0.1:26379"}}},
		{url: "redis-sentinel://:pw@10.0.0.1:26379,10.0.0.2:26379,s3.internal:26380/3?master=m&sentinel_password=spw", want: redis.FailoverOptions{
			MasterName: "m", SentinelAddrs: []string{"10.0.0.1:26379", "10.0.0.2:26379", "s3.internal:26380"}, Password: "pw", DB: 3, SentinelPassword: "spw",
		}},
		{url: "redis-sentinel://app:pw@s1:26379?master=m&sentinel_username=watch", want: redis.FailoverOptions{
			MasterName: "m", SentinelAddrs: []string{"s1:26379"}, Username: "app", Password: "pw", SentinelUsername: "watch",
		}},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseSentinelURL(u)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if diff := gocmp.Diff(tc.want, *got, cmpopts.IgnoreUnexported(redis.FailoverOptions{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.url, diff)
		}
		c, err := NewRedisClient(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if db := redisDB(c); db != tc.want.DB {
			t.Errorf("%s: client selects database %d, want %d", tc.url, db, tc.want.DB)
		}
		_ = c.Close()
	}
	for _, bad := range []string{"http://:s3cret@h:1/0", "redis://:s3cret@h:1/notadb", "::",
		"redis-sentinel://:s3cret@h:26379", "redis-sentinel://:s3cret@h?master=m", "redis-sentinel://:s3cret@h:1/x?master=m", "redis-sentinel://:s3cret@h:1?master=m&pool=3"} {
		_, err := NewRedisClient(bad)
		if err == nil {
			t.Errorf("%s: accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error shows the password: %v", bad, err)
		}
	}
}

func TestEmbeddedRedis(t *testing.T) {
	t.Parallel()
	er, err := StartEmbeddedRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer er.Close()
	if !strings.HasPrefix(er.URL(), "redis://127.0.0.1:") {
		t.Errorf("URL %s is not on 127.0.0.1", er.URL())
	}
	c, err := OpenRedis(t.Context(), er.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// TTLs follow the real clock.
	if err := c.Set(t.Context(), "k", "v", 100*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	chattest.Eventually(t, "key expiry", func() bool {
		n, err := c.Exists(t.Context(), "k").Result()
		return err == nil && n == 0
	})
	er.Close()
	er.Close() // twice is fine
	if _, err := OpenRedis(t.Context(), er.URL()); err == nil {
		t.Error("a closed embedded redis answered")
	}
}
