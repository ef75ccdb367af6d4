package worker

import (
	"cmp"
	"context"
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

// knownPrefix starts the key prchat:worker-known:<id>, which names the
// instance that beat last and outlives the heartbeat by knownTTL: a worker
// whose heartbeat is gone but which is known stopped beating (it crashed, or
// it stopped and deleted its heartbeat), while a worker of which Redis knows
// nothing at all may just have lost its keys to a flush.
const knownPrefix = "prchat:worker-known:"

// knownTTL is how long a worker's last instance is remembered.
const knownTTL = 24 * time.Hour

func heartbeatKey(id string) string { return heartbeatPrefix + id }
func knownKey(id string) string     { return knownPrefix + id }

// seenAliveFor is how long Hosts takes a worker it found alive for alive
// without asking Redis again. Every question about a session asks whether
// its host is alive; a worker's heartbeat outlives it by seconds anyway,
// and the reconciler moves the jobs of a dead worker's queue.
const seenAliveFor = time.Second

// HostsConfig configures Hosts.
type HostsConfig struct {
	// TTL is the workers' heartbeat TTL (HeartbeatConfig.TTL): a runner of
	// which Redis knows nothing (a flush took its keys) is declared dead
	// only once this Hosts has found it missing for that long. Default 9s.
	TTL time.Duration
	// Now tells the time. Default time.Now.
	Now func() time.Time
}

// Hosts tells which workers are alive from their heartbeats (see
// Heartbeat). It implements chat.Hosts.
type Hosts struct {
	rdb  redis.UniversalClient
	ttl  time.Duration
	now  func() time.Time
	seen sync.Map // host -> time.Time it was last found alive

	mu      sync.Mutex
	missing map[string]time.Time // runner -> when it was first found missing
}

var _ chat.Hosts = (*Hosts)(nil)

// NewHosts returns Hosts reading heartbeats from rdb.
func NewHosts(rdb redis.UniversalClient, cfg HostsConfig) *Hosts {
	h := &Hosts{rdb: rdb, ttl: cmp.Or(cfg.TTL, defaultHeartbeatTTL), now: cfg.Now, missing: map[string]time.Time{}}
	if h.now == nil {
		h.now = time.Now
	}
	return h
}

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
// A runner is dead at once when another instance of its worker beats, or
// when Redis remembers it but its heartbeat is gone (it crashed, or
// stopped); a runner of which Redis knows nothing (a flush took its keys
// and it has not beaten since) is dead only after this Hosts has found it
// so for the whole TTL, as a live worker beats again well within it. An
// empty or malformed runner id is not alive.
func (h *Hosts) RunnerAlive(ctx context.Context, runner string) (bool, error) {
	id, err := ParseRunner(runner)
	if err != nil {
		return false, nil
	}
	vals, err := h.rdb.MGet(ctx, heartbeatKey(id.ID), knownKey(id.ID)).Result()
	if err != nil {
		return false, fmt.Errorf("is runner %s alive: %w", runner, err)
	}
	beat, _ := vals[0].(string)
	known, _ := vals[1].(string)
	switch {
	case beat != "":
		h.found(runner)
		return beat == id.Instance, nil
	case known != "":
		h.found(runner)
		return false, nil
	}
	return h.missingFor(runner) < h.ttl, nil
}

// found forgets that runner was missing.
func (h *Hosts) found(runner string) {
	h.mu.Lock()
	delete(h.missing, runner)
	h.mu.Unlock()
}

// missingFor records that runner is missing and says since how long.
func (h *Hosts) missingFor(runner string) time.Duration {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	since, ok := h.missing[runner]
	if !ok {
		since = now
		h.missing[runner] = now
		for r, at := range h.missing { // keep the map small
			if now.Sub(at) > 100*h.ttl {
				delete(h.missing, r)
			}
		}
	}
	return now.Sub(since)
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
