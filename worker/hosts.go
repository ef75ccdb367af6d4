package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/chat"
)

// heartbeatPrefix starts the key of a worker's heartbeat,
// prchat:worker:<id>, whose value is the instance id of the live run.
const heartbeatPrefix = "prchat:worker:"

func heartbeatKey(id string) string { return heartbeatPrefix + id }

// seenAliveFor is how long Hosts takes a worker it found alive for alive
// without asking Redis again. Every question about a session asks whether
// its host is alive; a worker's heartbeat outlives it by seconds anyway,
// and the reconciler moves the jobs of a dead worker's queue.
const seenAliveFor = time.Second

// Hosts tells which workers are alive from their heartbeats (see
// Heartbeat). It implements chat.Hosts.
type Hosts struct {
	rdb  redis.UniversalClient
	seen sync.Map // host -> time.Time it was last found alive
}

var _ chat.Hosts = (*Hosts)(nil)

// NewHosts returns Hosts reading heartbeats from rdb.
func NewHosts(rdb redis.UniversalClient) *Hosts { return &Hosts{rdb: rdb} }

// Alive reports whether worker host sends heartbeats (or did less than
// seenAliveFor ago). An empty host is not alive.
func (h *Hosts) Alive(ctx context.Context, host string) (bool, error) {
	if host == "" {
		return false, nil
	}
	if at, ok := h.seen.Load(host); ok && time.Since(at.(time.Time)) < seenAliveFor {
		return true, nil
	}
	n, err := h.rdb.Exists(ctx, heartbeatKey(host)).Result()
	if err != nil {
		return false, fmt.Errorf("is worker %s alive: %w", host, err)
	}
	if n == 0 {
		h.seen.Delete(host)
		return false, nil
	}
	h.seen.Store(host, time.Now())
	return true, nil
}

// RunnerAlive reports whether runner ("<id>/<instance>") is the live run of
// its worker: the worker sends heartbeats and they come from that instance.
// An empty or malformed runner id is not alive.
func (h *Hosts) RunnerAlive(ctx context.Context, runner string) (bool, error) {
	id, err := ParseRunner(runner)
	if err != nil {
		return false, nil
	}
	inst, err := h.rdb.Get(ctx, heartbeatKey(id.ID)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("is runner %s alive: %w", runner, err)
	}
	return inst == id.Instance, nil
}

// Workers lists the ids of the workers that send heartbeats, sorted.
func (h *Hosts) Workers(ctx context.Context) ([]string, error) {
	var ids []string
	iter := h.rdb.Scan(ctx, 0, heartbeatPrefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		ids = append(ids, strings.TrimPrefix(iter.Val(), heartbeatPrefix))
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}
