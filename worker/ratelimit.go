package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/chat"
)

// gcra is the generic cell rate algorithm in one script, so that every API
// process shares one limit per key. KEYS[1] holds the key's theoretical
// arrival time (TAT) in microseconds; ARGV are now, the emission interval
// (Per/Count) and the burst tolerance ((Count-1) intervals), in
// microseconds. It returns 0 when the event is allowed (and takes it),
// else the microseconds until one is.
var gcra = redis.NewScript(`
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local tolerance = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or ARGV[1])
if tat < now then tat = now end
if tat - now > tolerance then
  return tat - now - tolerance
end
local new = tat + interval
redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', math.floor((new - now) / 1000) + 1)
return 0
`)

// RateLimiter keeps rate limits in Redis, shared by every process that
// uses the same Redis: a GCRA (generic cell rate algorithm) per key, one
// round trip per event, keys expiring once their limit is full again. It
// implements chat.RateLimiter.
//
// The time is the caller's (chat passes its clock), so that tests can
// drive it and processes with clocks a few milliseconds apart agree
// closely enough.
type RateLimiter struct {
	rdb    redis.UniversalClient
	prefix string
}

var _ chat.RateLimiter = (*RateLimiter)(nil)

// NewRateLimiter returns a RateLimiter on rdb, its keys under
// prchat:rate:.
func NewRateLimiter(rdb redis.UniversalClient) *RateLimiter {
	return &RateLimiter{rdb: rdb, prefix: "prchat:rate:"}
}

// Allow takes one event of key under limit at now, or returns how long
// until one is allowed.
func (l *RateLimiter) Allow(ctx context.Context, key string, limit chat.Rate, now time.Time) (time.Duration, error) {
	if limit.Off() {
		return 0, nil
	}
	interval := limit.Per.Microseconds() / int64(limit.Count)
	tolerance := interval * int64(limit.Count-1)
	wait, err := gcra.Run(ctx, l.rdb, []string{l.prefix + key}, now.UnixMicro(), interval, tolerance).Int64()
	if err != nil {
		return 0, fmt.Errorf("rate limit %s: %w", key, err)
	}
	return time.Duration(wait) * time.Microsecond, nil
}
