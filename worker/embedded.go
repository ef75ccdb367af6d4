package worker

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"
)

// EmbeddedRedis is an in-process Redis-compatible server (miniredis) for
// `prchat serve` when no Redis URL is configured. It listens on a free port
// of 127.0.0.1, keeps nothing across a restart, and lets keys expire on the
// real clock. Losing its data is safe: the database is the source of truth
// and the Reconciler enqueues the jobs of turns again.
type EmbeddedRedis struct {
	m    *miniredis.Miniredis
	addr string
}

// StartEmbeddedRedis starts an EmbeddedRedis. Close it when done.
func StartEmbeddedRedis() (*EmbeddedRedis, error) {
	m := miniredis.NewMiniRedis()
	// TTLs follow the wall clock (miniredis otherwise only expires keys on
	// FastForward), so heartbeats and locks expire as they would on Redis.
	m.ClockTTL(true)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded redis: %w", err)
	}
	return &EmbeddedRedis{m: m, addr: m.Addr()}, nil
}

// URL is the redis:// URL of the server (database 0).
func (e *EmbeddedRedis) URL() string { return "redis://" + e.addr + "/0" }

// Addr is the server's host:port.
func (e *EmbeddedRedis) Addr() string { return e.addr }

// Close stops the server and drops its data. It is safe to call twice.
func (e *EmbeddedRedis) Close() { e.m.Close() }
