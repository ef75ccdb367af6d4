package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/go-redis/v9"
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
//
// Clients in the process reach it through in-memory connections (Client,
// Dial) rather than TCP loopback, whose write and read syscalls and poller
// wake-ups on both sides were about 40% of an idle serve's CPU. The TCP
// listener stays for other clients (tests, prchat-bench).
type EmbeddedRedis struct {
	m    *miniredis.Miniredis
	addr string

	// mu orders Dial against Close, so that no connection is handed to the
	// server once Close has begun closing the server's connections.
	mu     sync.Mutex
	closed bool

	// otherDB is set once a client selects a database other than 0, which
	// answerIdlePoll cannot see into; idlePolls and idleForwards count the
	// dequeue and forward scripts it answered.
	otherDB      atomic.Bool
	idlePolls    atomic.Int64
	idleForwards atomic.Int64

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

// forwardScriptSHA is the SHA1 of asynq's forward script (v0.26), called
// with a queue's scheduled or retry set and its pending list as KEYS, every
// DelayedTaskCheckInterval for each set. When the set does not exist the
// script returns 0 and changes nothing. A test fails if it changes.
const forwardScriptSHA = "522b1a6ae66fe79ea2f24a9af58798ab71879035"

// answerIdlePoll answers asynq's dequeue script (and the idle poller's
// dequeueAny over several queues) with nil, and its forward
// script with 0, as the scripts would, when the list or set they take from
// does not exist, so that an idle worker's polls do not start a Lua VM:
// miniredis makes a new one for every script call (about half a
// millisecond of CPU with its garbage), which at one poll every few
// milliseconds was most of an idle serve's CPU. Any other command, and a
// script with jobs to take, goes on to miniredis.
func (e *EmbeddedRedis) answerIdlePoll(c *server.Peer, cmd string, args ...string) bool {
	switch {
	case cmd == "SELECT" && (len(args) != 1 || args[0] != "0"):
		e.otherDB.Store(true)
		return false
	case cmd != "EVALSHA" || len(args) < 2 || e.otherDB.Load():
		return false
	case args[0] == dequeueScriptSHA && args[1] == "4" && len(args) == 8,
		args[0] == dequeueAny.Hash() && (len(args)-3)%5 == 0 && args[1] == strconv.Itoa(4*((len(args)-3)/5)):
		// asynq's dequeue of one queue, or dequeueAny's of several: four
		// keys a queue, then their arguments.
		n, _ := strconv.Atoi(args[1])
		if !e.noJobs(args[2 : 2+n]) {
			return false
		}
		e.idlePolls.Add(1)
		c.WriteNull()
		return true
	case args[0] == forwardScriptSHA && args[1] == "2" && len(args) == 8:
		if !strings.HasSuffix(args[3], ":pending") || e.m.DB(0).Exists(args[2]) {
			return false
		}
		e.idleForwards.Add(1)
		c.WriteInt(0)
		return true
	}
	return false
}

// noJobs reports whether keys are the keys of asynq's dequeue of queues,
// four a queue (pending list, paused flag, active list, lease set), and
// none of their pending lists exists.
func (e *EmbeddedRedis) noJobs(keys []string) bool {
	if len(keys) == 0 || len(keys)%4 != 0 {
		return false
	}
	for i := 0; i < len(keys); i += 4 {
		queue, ok := strings.CutSuffix(keys[i], ":pending")
		if !ok || keys[i+1] != queue+":paused" || keys[i+2] != queue+":active" || keys[i+3] != queue+":lease" || e.m.DB(0).Exists(keys[i]) {
			return false
		}
	}
	return true
}

// URL is the redis:// URL of the server (database 0).
func (e *EmbeddedRedis) URL() string { return "redis://" + e.addr + "/0" }

// Addr is the server's host:port.
func (e *EmbeddedRedis) Addr() string { return e.addr }

// errEmbeddedClosed is Dial's error after Close.
var errEmbeddedClosed = errors.New("embedded redis is closed")

// Dial opens an in-memory connection to the server; it has the signature
// of redis.Options.Dialer and ignores its arguments. It fails after Close.
func (e *EmbeddedRedis) Dial(context.Context, string, string) (net.Conn, error) {
	client, srv := newMemConns()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errEmbeddedClosed
	}
	e.m.Server().ServeConn(srv) // the server closes srv when it is closed
	return client, nil
}

// Client returns a client of database 0 that connects through Dial, once
// the server answers a PING. It has the settings NewRedisClient gives the
// server's URL. Its owner closes it, before closing e.
func (e *EmbeddedRedis) Client(ctx context.Context) (redis.UniversalClient, error) {
	opt, err := redis.ParseURL(e.URL())
	if err != nil {
		return nil, fmt.Errorf("parse embedded redis url: %w", err)
	}
	opt.Dialer = e.Dial
	c := redis.NewClient(opt)
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("ping embedded redis: %w", err)
	}
	return c, nil
}

// Close stops the server, closing its connections (in-memory ones too),
// and drops its data. It is safe to call twice.
func (e *EmbeddedRedis) Close() {
	e.once.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		close(e.stop)
		<-e.done
		e.m.Close()
	})
}
