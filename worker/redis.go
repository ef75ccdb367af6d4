package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// NewRedisClient returns a Redis client for rawURL, without connecting yet.
// Understood forms:
//
//	redis://[[user]:password@]host:port[/db][?options]   (plain TCP)
//	rediss://[[user]:password@]host:port[/db][?options]  (TLS)
//	unix://[[user]:password@]/path/to/socket[?db=N]
//	redis-sentinel://[[user]:password@]host:port[,host:port...][/db]?master=name[&sentinel_password=...]
//
// The query options of redis://, rediss:// and unix:// are go-redis's
// (dial_timeout, pool_size, ...). A redis-sentinel:// URL names the
// sentinels and the master's name: the client asks the sentinels where the
// master is, and again when it fails over; its user and password are the
// master's (and its replicas'), sentinel_username and sentinel_password
// those of the sentinels, if they have any. One client serves the Queue,
// Hosts, Heartbeat and Server of a process; its owner closes it.
func NewRedisClient(rawURL string) (redis.UniversalClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse redis url: %w", err)
	}
	switch u.Scheme {
	case "redis", "rediss", "unix":
		opt, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("parse redis url %s: %w", u.Redacted(), err)
		}
		return redis.NewClient(opt), nil
	case "redis-sentinel":
		opt, err := parseSentinelURL(u)
		if err != nil {
			return nil, fmt.Errorf("parse redis url %s: %w", u.Redacted(), err)
		}
		return redis.NewFailoverClient(opt), nil
	default:
		return nil, fmt.Errorf("redis url %s: unsupported scheme %q (want redis, rediss, unix or redis-sentinel)", u.Redacted(), u.Scheme)
	}
}

// parseSentinelURL reads a redis-sentinel:// URL (see NewRedisClient).
// asynq's parser of the same scheme is not used: it takes the password for
// the sentinels' and gives the master none, and drops the database.
func parseSentinelURL(u *url.URL) (*redis.FailoverOptions, error) {
	opt := &redis.FailoverOptions{}
	for addr := range strings.SplitSeq(u.Host, ",") {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("sentinel address %q is not host:port", addr)
		}
		opt.SentinelAddrs = append(opt.SentinelAddrs, addr)
	}
	if u.User != nil {
		opt.Username = u.User.Username()
		opt.Password, _ = u.User.Password()
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("database %q is not a number", db)
		}
		opt.DB = n
	}
	q := u.Query()
	for k := range q {
		switch k {
		case "master", "sentinel_username", "sentinel_password":
		default:
			return nil, fmt.Errorf("unknown option %q (want master, sentinel_username or sentinel_password)", k)
		}
	}
	opt.MasterName = q.Get("master")
	opt.SentinelUsername = q.Get("sentinel_username")
	opt.SentinelPassword = q.Get("sentinel_password")
	if opt.MasterName == "" {
		return nil, errors.New("no master name (?master=...)")
	}
	return opt, nil
}

// OpenRedis returns a Redis client for rawURL (see NewRedisClient) once the
// server answers a PING.
func OpenRedis(ctx context.Context, rawURL string) (redis.UniversalClient, error) {
	c, err := NewRedisClient(rawURL)
	if err != nil {
		return nil, err
	}
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("ping redis %s: %w", redactURL(rawURL), err)
	}
	return c, nil
}

// redactURL returns rawURL with its password replaced by "xxxxx".
func redactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}
