package worker

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
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
//
// An idle worker's poll of an empty queue is answered without Lua: see
// answerIdlePoll.
type EmbeddedRedis struct {
	m    *miniredis.Miniredis
	addr string

	// otherDB is set once a client selects a database other than 0, which
	// answerIdlePoll cannot see into; idlePolls counts the polls it answered.
	otherDB   atomic.Bool
	idlePolls atomic.Int64

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
	m.Server().SetPreHook(e.answerIdlePoll)
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

// dequeueScriptSHA is the SHA1 of asynq's dequeue script (v0.26), called
// with a queue's pending list, paused flag, active list and lease set as
// KEYS. When the pending list does not exist the script returns nil and
// changes nothing. A test fails if asynq's script changes.
const dequeueScriptSHA = "a8153319360adc71cdc370107f8ab9786f204765"

// answerIdlePoll answers asynq's dequeue script with nil, as the script
// would, when the queue's pending list does not exist, so that an idle
// worker's poll does not start a Lua VM: miniredis makes a new one for every
// script call (about half a millisecond of CPU with its garbage), which at
// one poll every few milliseconds was most of an idle serve's CPU. Any other
// command, and a dequeue with jobs to take, goes on to miniredis.
func (e *EmbeddedRedis) answerIdlePoll(c *server.Peer, cmd string, args ...string) bool {
	switch {
	case cmd == "SELECT" && (len(args) != 1 || args[0] != "0"):
		e.otherDB.Store(true)
		return false
	case cmd != "EVALSHA" || len(args) != 8 || args[0] != dequeueScriptSHA || args[1] != "4" || e.otherDB.Load():
		return false
	}
	queue, ok := strings.CutSuffix(args[2], ":pending")
	if !ok || args[3] != queue+":paused" || args[4] != queue+":active" || args[5] != queue+":lease" {
		return false
	}
	if e.m.DB(0).Exists(args[2]) {
		return false
	}
	e.idlePolls.Add(1)
	c.WriteNull()
	return true
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
