package worker

import (
	"context"
	"fmt"
	"net/url"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// NewRedisClient returns a Redis client for rawURL, without connecting yet.
// Understood forms:
//
//	redis://[[user]:password@]host:port[/db][?options]   (plain TCP)
//	rediss://[[user]:password@]host:port[/db][?options]  (TLS)
//	unix://[[user]:password@]/path/to/socket[?db=N]
//	redis-sentinel://[:password@]host:port[,host:port...][?master=name]
//
// The query options of redis://, rediss:// and unix:// are go-redis's
// (dial_timeout, pool_size, ...). One client serves the Queue, Hosts,
// Heartbeat and Server of a process; its owner closes it.
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
		opt, err := asynq.ParseRedisURI(rawURL)
		if err != nil {
			return nil, fmt.Errorf("parse redis url %s: %w", u.Redacted(), err)
		}
		c, ok := opt.MakeRedisClient().(redis.UniversalClient)
		if !ok {
			return nil, fmt.Errorf("parse redis url %s: unsupported connection", u.Redacted())
		}
		return c, nil
	default:
		return nil, fmt.Errorf("redis url %s: unsupported scheme %q (want redis, rediss, unix or redis-sentinel)", u.Redacted(), u.Scheme)
	}
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
