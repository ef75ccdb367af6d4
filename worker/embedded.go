package worker

import (
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// expiryTick is how often the embedded Redis expires keys.
const expiryTick = 250 * time.Millisecond

// EmbeddedRedis is an in-process Redis-compatible server (miniredis) for
// `prchat serve` when no Redis URL is configured. It listens on a free port
// of 127.0.0.1, keeps nothing across a restart, and lets keys expire on the
// real clock. Losing its data is safe: the database is the source of truth
// and the Reconciler enqueues the jobs of turns again.
//
// Keys expire by a ticker that moves miniredis's TTL clock forward every
// expiryTick, rather than by ClockTTL(true): that mode expires keys on every
// command by sorting all keys, which made each command cost more as turn
// event streams accumulated (0.8 ms at 1,000 keys, 19 ms at 10,000).
type EmbeddedRedis struct {
	m    *miniredis.Miniredis
	addr string

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// StartEmbeddedRedis starts an EmbeddedRedis. Close it when done.
func StartEmbeddedRedis() (*EmbeddedRedis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded redis: %w", err)
	}
	e := &EmbeddedRedis{m: m, addr: m.Addr(), stop: make(chan struct{}), done: make(chan struct{})}
	go e.expire()
	return e, nil
}

// expire moves the TTL clock forward by the real time that passed, so keys
// expire as they would on Redis (within expiryTick).
func (e *EmbeddedRedis) expire() {
	defer close(e.done)
	t := time.NewTicker(expiryTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			e.m.FastForward(now.Sub(last))
			last = now
		}
	}
}

// URL is the redis:// URL of the server (database 0).
func (e *EmbeddedRedis) URL() string { return "redis://" + e.addr + "/0" }

// Addr is the server's host:port.
func (e *EmbeddedRedis) Addr() string { return e.addr }

// Close stops the server and drops its data. It is safe to call twice.
func (e *EmbeddedRedis) Close() {
	e.once.Do(func() {
		close(e.stop)
		<-e.done
		e.m.Close()
	})
}
