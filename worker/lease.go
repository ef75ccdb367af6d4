package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// reconcilerLeaseKey is the key of the reconciler's lease: the holder's id,
// with a TTL. The one process holding it makes the deployment's passes.
const reconcilerLeaseKey = "prchat:reconciler:lease"

// holdScript renews the lease KEYS[1] for ARGV[1] (ARGV[2] ms) when ARGV[1]
// holds it, takes it when nobody does, and reports whether ARGV[1] holds it.
var holdScript = redis.NewScript(`
local holder = redis.call("GET", KEYS[1])
if holder == ARGV[1] then
	redis.call("PEXPIRE", KEYS[1], ARGV[2])
	return 1
end
if not holder then
	redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
	return 1
end
return 0`)

// lease is a lease in Redis that one holder at a time has: it lasts ttl
// from its holder's last hold, so a holder that dies loses it ttl later.
type lease struct {
	rdb    redis.UniversalClient
	key    string
	holder string
	ttl    time.Duration
}

// hold takes the lease, or renews it when this holder has it, and reports
// whether this holder has it now.
func (l *lease) hold(ctx context.Context) (bool, error) {
	n, err := holdScript.Run(ctx, l.rdb, []string{l.key}, l.holder, l.ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("hold lease %s: %w", l.key, err)
	}
	return n == 1, nil
}

// release gives the lease up if this holder has it, so that another takes it
// at its next try rather than a ttl later.
func (l *lease) release(ctx context.Context) error {
	if err := delScript.Run(ctx, l.rdb, []string{l.key}, l.holder).Err(); err != nil {
		return fmt.Errorf("release lease %s: %w", l.key, err)
	}
	return nil
}
