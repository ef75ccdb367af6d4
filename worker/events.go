package worker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prchat/prchat/chat"
	"github.com/redis/go-redis/v9"
)

// EventsConfig configures Events.
type EventsConfig struct {
	// MaxLen bounds each turn's stream (approximately). Default 10,000.
	MaxLen int64
	// TTL is how long a turn's stream lives after its last event (a
	// process renews a stream's TTL at most once per ttlRefresh, so up to
	// that much less); streams of settled turns expire after SettledTTL.
	// Defaults 24h and 1h. A repository's feed lives TTL after its last
	// event too.
	TTL        time.Duration
	SettledTTL time.Duration
	// FeedMaxLen bounds each repository's feed stream. Default 1,000.
	FeedMaxLen int64
	// Buffer is how many events a follower may lag behind before it is
	// dropped (it then catches up from the store). Default 64.
	Buffer int
	// Block is how long one blocking read waits. Default 5s.
	Block  time.Duration
	Logger *slog.Logger
}

func (c EventsConfig) withDefaults() EventsConfig {
	c.MaxLen = cmp.Or(c.MaxLen, 10_000)
	c.TTL = cmp.Or(c.TTL, 24*time.Hour)
	c.SettledTTL = cmp.Or(c.SettledTTL, time.Hour)
	c.FeedMaxLen = cmp.Or(c.FeedMaxLen, 1_000)
	c.Buffer = cmp.Or(c.Buffer, 64)
	c.Block = cmp.Or(c.Block, 5*time.Second)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}

// Events carries turn events between processes through Redis: a stream per
// turn (prchat:events:<turn id>) and a stream per repository feed
// (prchat:feed:<owner/repo>). The events of one Publish are one entry of
// the turn's stream, whose id is <seq>-1 of the last of them: a field "b"
// holds a JSON array of them (a field "e" one event, as a publish of one
// event, and earlier versions, write it). It implements chat.Publisher
// and chat.Follower. One reader goroutine per process serves every follower
// of that process with one blocking XREAD over the watched streams, so the
// number of subscribers costs no Redis connections, and a slow follower is
// dropped rather than slowing the others. Each follower gets the entries
// after its own position: one that joins a stream already read past that
// position (a client reconnecting with Last-Event-ID) sets the reader back
// to it, and the followers that had those entries skip them.
type Events struct {
	rdb  redis.UniversalClient
	cfg  EventsConfig
	log  *slog.Logger
	wake string // the stream that interrupts the reader when the watch set changes

	ttlMu  sync.Mutex           // guards ttlSet
	ttlSet map[string]time.Time // stream key -> when this process last set its TTL

	// finals holds the final publishes of turns run by this process until
	// the script call that ends their job takes them.
	finals *finals

	lc      *lifecycle        // of the reader
	mu      sync.Mutex        // guards what follows
	watches map[string]*watch // stream key -> followers
	gen     uint64            // the last watch generation handed out
	closed  bool
}

var (
	_ chat.Publisher = (*Events)(nil)
	_ chat.Follower  = (*Events)(nil)
)

// watch is one stream with local followers.
type watch struct {
	last string // the id read last, or the position to read from
	// gen changes whenever last is set back: a read that was under way
	// then is not dispatched (what it got is read again from last).
	gen       uint64
	decode    func(m redis.XMessage) (any, bool)
	followers map[*follower]struct{}
}

// follower receives the decoded entries of one stream after its position.
type follower struct {
	after streamID // the entry delivered last, or where it joined
	// deliver hands the follower an entry's value, after its position
	// (which it had of the entry, if any: an entry holds several events);
	// false: the follower is full.
	deliver func(v any, after streamID) bool
	close   func()
}

// streamID is a Redis stream entry id, <ms>-<seq>.
type streamID struct{ ms, seq uint64 }

// parseStreamID parses id; ok is false if it is not an entry id.
func parseStreamID(id string) (streamID, bool) {
	ms, seq, ok := strings.Cut(id, "-")
	if !ok {
		return streamID{}, false
	}
	m, err1 := strconv.ParseUint(ms, 10, 64)
	n, err2 := strconv.ParseUint(seq, 10, 64)
	return streamID{m, n}, err1 == nil && err2 == nil
}

// before reports whether a comes before b in a stream.
func (a streamID) before(b streamID) bool {
	return a.ms < b.ms || a.ms == b.ms && a.seq < b.seq
}

// NewEvents returns Events on rdb.
func NewEvents(rdb redis.UniversalClient, cfg EventsConfig) *Events {
	cfg = cfg.withDefaults()
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Events{rdb: rdb, cfg: cfg, log: cfg.Logger, wake: "prchat:wake:" + hex.EncodeToString(b[:]), watches: map[string]*watch{}, ttlSet: map[string]time.Time{}, lc: newLifecycle("worker events"), finals: newFinals(rdb, cfg.Logger)}
}

// ttlRefresh is how often a process renews the TTL of a stream it keeps
// publishing to: a running turn's stream and a busy repository's feed got
// an EXPIRE with every publish, several per turn, to move an expiry a day
// away by seconds.
const ttlRefresh = time.Minute

// renewTTL reports whether a publish to key should set its TTL again, and
// if so records that it does.
func (e *Events) renewTTL(key string, now time.Time) bool {
	e.ttlMu.Lock()
	defer e.ttlMu.Unlock()
	if at, ok := e.ttlSet[key]; ok && now.Sub(at) < ttlRefresh {
		return false
	}
	if len(e.ttlSet) >= 4096 {
		for k, at := range e.ttlSet {
			if now.Sub(at) >= ttlRefresh {
				delete(e.ttlSet, k)
			}
		}
	}
	e.ttlSet[key] = now
	return true
}

// forgetTTL drops key from the renewals (its stream ended).
func (e *Events) forgetTTL(key string) {
	e.ttlMu.Lock()
	defer e.ttlMu.Unlock()
	delete(e.ttlSet, key)
}

// Start starts the reader that serves this process's followers, until Stop.
// Following a turn or a feed starts it too, so Start is optional; a second
// Start is not an error.
func (e *Events) Start(ctx context.Context) error {
	err := e.lc.start(context.WithoutCancel(ctx), nil, e.read)
	if errors.Is(err, errStarted) {
		return nil
	}
	return err
}

func turnKey(turnID string) string { return "prchat:events:" + turnID }
func feedKey(repo string) string   { return "prchat:feed:" + repo }

// Publish adds a turn's events to its stream and feed events to their
// repositories' feeds, in one pipeline. Within the handler of a job of a
// Server configured with these Events, the publish of a turn's final
// events rides with the script call that ends the job instead (see
// finals).
func (e *Events) Publish(ctx context.Context, turnID string, events []chat.Event, feed []chat.FeedEvent) error {
	if len(events)+len(feed) == 0 {
		return nil
	}
	pub, err := e.prepare(turnID, events, feed)
	if err != nil {
		return err
	}
	if e.finals.hold(ctx, pub) {
		return nil
	}
	pipe := e.rdb.Pipeline()
	pub.queue(ctx, pipe)
	cmds, err := pipe.Exec(ctx)
	return pub.check(cmds, err)
}

// publication is a Publish's commands, encoded, ready to be queued on a
// pipeline.
type publication struct {
	e      *Events
	turnID string
	final  bool // the turn's events end with a final one
	// the turn's stream entry: its id, field and value, and the TTL to set
	// (0: none)
	id, field string
	batch     []byte
	ttl       time.Duration
	feed      []chat.FeedEvent
	news      [][]byte // feed, encoded
}

// prepare encodes a publish: the events in one entry of the turn's stream
// (their own encodings joined into an array, not encoded again), and the
// feed events.
func (e *Events) prepare(turnID string, events []chat.Event, feed []chat.FeedEvent) (*publication, error) {
	pub := &publication{e: e, turnID: turnID, feed: feed}
	if len(events) > 0 {
		key := turnKey(turnID)
		var batch []byte
		for i := range events {
			ev := &events[i]
			data, err := ev.JSON()
			if err != nil {
				return nil, fmt.Errorf("publish events of turn %s: %w", turnID, err)
			}
			if len(events) == 1 {
				batch = data
				break
			}
			if i == 0 {
				batch = append(batch, '[')
			} else {
				batch = append(batch, ',')
			}
			batch = append(batch, data...)
			pub.final = pub.final || ev.Final()
		}
		pub.field, pub.batch = "e", batch
		if len(events) > 1 {
			pub.field, pub.batch = "b", append(batch, ']')
		}
		last := events[len(events)-1]
		pub.final = pub.final || last.Final()
		pub.id = strconv.FormatInt(last.Seq, 10) + "-1"
		switch {
		case pub.final:
			pub.ttl = e.cfg.SettledTTL
			e.forgetTTL(key)
		case e.renewTTL(key, time.Now()):
			pub.ttl = e.cfg.TTL
		}
	}
	for _, fe := range feed {
		data, err := encodeFeed(fe)
		if err != nil {
			return nil, err
		}
		pub.news = append(pub.news, data)
	}
	return pub, nil
}

// queue queues the publication's commands on pipe.
func (p *publication) queue(ctx context.Context, pipe redis.Pipeliner) {
	e := p.e
	if p.batch != nil {
		key := turnKey(p.turnID)
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: p.id, MaxLen: e.cfg.MaxLen, Approx: true, Values: []any{p.field, p.batch}})
		if p.ttl > 0 {
			pipe.Expire(ctx, key, p.ttl)
		}
	}
	for i, data := range p.news {
		e.addEncodedFeed(ctx, pipe, p.feed[i].Repository, data)
	}
}

// check is the error of a pipeline that carried the publication (cmds,
// and err of its Exec): an entry id at or below the stream's last one
// means another run already published it, which is not an error for the
// followers.
func (p *publication) check(cmds []redis.Cmder, err error) error {
	if err == nil {
		return nil
	}
	for _, c := range cmds {
		if c.Err() != nil && !strings.Contains(c.Err().Error(), "equal or smaller") {
			return fmt.Errorf("publish events of turn %s: %w", p.turnID, c.Err())
		}
	}
	return nil
}

// PublishFeed adds a state change to the repository's feed.
func (e *Events) PublishFeed(ctx context.Context, repo string, fe chat.FeedEvent) error {
	pipe := e.rdb.Pipeline()
	if err := e.addFeed(ctx, pipe, fe); err != nil {
		return err
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("publish feed of %s: %w", repo, err)
	}
	return nil
}

// addFeed queues a feed event on pipe.
func (e *Events) addFeed(ctx context.Context, pipe redis.Pipeliner, fe chat.FeedEvent) error {
	data, err := encodeFeed(fe)
	if err != nil {
		return err
	}
	e.addEncodedFeed(ctx, pipe, fe.Repository, data)
	return nil
}

// encodeFeed is a feed event as its feed's entry holds it.
func encodeFeed(fe chat.FeedEvent) ([]byte, error) {
	data, err := json.Marshal(fe)
	if err != nil {
		return nil, fmt.Errorf("publish feed of %s: %w", fe.Repository, err)
	}
	return data, nil
}

// addEncodedFeed queues the feed event of repo encoded as data on pipe.
func (e *Events) addEncodedFeed(ctx context.Context, pipe redis.Pipeliner, repo string, data []byte) {
	key := feedKey(repo)
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, MaxLen: e.cfg.FeedMaxLen, Approx: true, Values: []any{"e", data}})
	if e.renewTTL(key, time.Now()) {
		pipe.Expire(ctx, key, e.cfg.TTL)
	}
}

// Follow returns the live events of a turn with Seq > after. Each entry is
// decoded once into a value every follower of the turn shares.
func (e *Events) Follow(ctx context.Context, turnID string, after int64) (<-chan *chat.Event, error) {
	ch := make(chan *chat.Event, e.cfg.Buffer)
	f := &follower{}
	f.deliver = func(v any, after streamID) bool {
		for _, ev := range v.([]*chat.Event) {
			if uint64(ev.Seq) <= after.ms {
				continue // it had this one
			}
			select {
			case ch <- ev:
			default:
				return false
			}
		}
		return true
	}
	f.close = func() { close(ch) }
	decode := func(m redis.XMessage) (any, bool) {
		evs, err := decodeTurnEntry(m)
		if err != nil {
			e.log.Warn("decode turn events", slog.String("turn", turnID), slog.String("entry", m.ID), slog.Any("err", err))
			return nil, false
		}
		return evs, true
	}
	if err := e.add(ctx, turnKey(turnID), strconv.FormatInt(after, 10)+"-1", decode, f); err != nil {
		return nil, err
	}
	return ch, nil
}

// decodeTurnEntry returns the events of an entry of a turn's stream, in
// order.
func decodeTurnEntry(m redis.XMessage) ([]*chat.Event, error) {
	if data, ok := m.Values["b"].(string); ok {
		var evs []*chat.Event
		if err := json.Unmarshal([]byte(data), &evs); err != nil {
			return nil, err
		}
		return evs, nil
	}
	data, _ := m.Values["e"].(string)
	var ev chat.Event
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return nil, err
	}
	return []*chat.Event{&ev}, nil
}

// FollowFeed returns a repository's feed events after the position after
// ("" = from now).
func (e *Events) FollowFeed(ctx context.Context, repo, after string) (<-chan chat.FeedEvent, error) {
	key := feedKey(repo)
	if after == "" {
		// "From now": the feed's current last id.
		msgs, err := e.rdb.XRevRangeN(ctx, key, "+", "-", 1).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("follow feed of %s: %w", repo, err)
		}
		after = "0-0"
		if len(msgs) > 0 {
			after = msgs[0].ID
		}
	} else if !validStreamID(after) {
		return nil, chat.Errorf(chat.CodeInvalid, "Last-Event-ID %q is not a feed position", after)
	}
	ch := make(chan chat.FeedEvent, e.cfg.Buffer)
	f := &follower{close: func() { close(ch) }}
	f.deliver = func(v any, _ streamID) bool {
		select {
		case ch <- v.(chat.FeedEvent):
			return true
		default:
			return false
		}
	}
	decode := func(m redis.XMessage) (any, bool) {
		data, _ := m.Values["e"].(string)
		var fe chat.FeedEvent
		if err := json.Unmarshal([]byte(data), &fe); err != nil {
			return nil, false
		}
		fe.ID = m.ID
		return fe, true
	}
	if err := e.add(ctx, key, after, decode, f); err != nil {
		return nil, err
	}
	return ch, nil
}

func validStreamID(id string) bool {
	_, ok := parseStreamID(id)
	return ok
}

// add registers a follower of key that gets the entries after from (an
// entry id), and removes it when ctx ends.
func (e *Events) add(ctx context.Context, key, from string, decode func(redis.XMessage) (any, bool), f *follower) error {
	pos, ok := parseStreamID(from)
	if !ok {
		return fmt.Errorf("follow %s: %q is not a stream position", key, from)
	}
	f.after = pos
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errors.New("events: closed")
	}
	w := e.watches[key]
	changed := true
	if w == nil {
		e.gen++
		w = &watch{last: from, gen: e.gen, decode: decode, followers: map[*follower]struct{}{}}
		e.watches[key] = w
	} else if last, _ := parseStreamID(w.last); pos.before(last) {
		// The stream is read already, past where this follower joins (a
		// client reconnecting with Last-Event-ID): read it again from
		// there. The followers that had those entries skip them.
		e.gen++
		w.last, w.gen = from, e.gen
	} else {
		// The reader reads the stream already, from before this follower's
		// position: it delivers the entries after it with no new read.
		changed = false
	}
	w.followers[f] = struct{}{}
	e.mu.Unlock()
	if err := e.Start(ctx); err != nil {
		e.remove(key, f)
		return err
	}
	if changed {
		e.poke()
	}
	context.AfterFunc(ctx, func() { e.remove(key, f) })
	return nil
}

func (e *Events) remove(key string, f *follower) {
	e.mu.Lock()
	if w := e.watches[key]; w != nil {
		if _, ok := w.followers[f]; ok {
			delete(w.followers, f)
			f.close()
		}
		if len(w.followers) == 0 {
			delete(e.watches, key)
		}
	}
	e.mu.Unlock()
}

// poke interrupts the reader's blocking read so it sees a new watch (or a
// watch set back), in one round trip.
func (e *Events) poke() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pipe := e.rdb.Pipeline()
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: e.wake, MaxLen: 10, Approx: false, Values: []any{"w", "1"}})
	pipe.Expire(ctx, e.wake, time.Hour)
	if _, err := pipe.Exec(ctx); err != nil {
		e.log.Warn("wake events reader", slog.Any("err", err))
	}
}

// readRetry spaces the reader's attempts while Redis fails its reads.
var readRetry = chat.Backoff{First: 250 * time.Millisecond, Max: 2 * time.Second}

// read is the process's one reader: it blocks on every watched stream at
// once and hands what arrives to the followers.
func (e *Events) read(ctx context.Context) {
	wakeLast := "0-0" // not "$": a wake sent before the first read must count
	failures := 0
	for ctx.Err() == nil {
		e.mu.Lock()
		keys := make([]string, 0, len(e.watches)+1)
		ids := make([]string, 0, len(e.watches)+1)
		gens := make(map[string]uint64, len(e.watches))
		for k, w := range e.watches {
			keys = append(keys, k)
			ids = append(ids, w.last)
			gens[k] = w.gen
		}
		e.mu.Unlock()
		keys = append(keys, e.wake)
		ids = append(ids, wakeLast)
		res, err := e.rdb.XRead(ctx, &redis.XReadArgs{Streams: append(keys, ids...), Block: e.cfg.Block, Count: 256}).Result()
		switch {
		case errors.Is(err, redis.Nil):
			failures = 0
			continue
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			e.log.Warn("read events", slog.Any("err", err))
			e.dropAll() // followers catch up from the store and follow again
			failures++
			if readRetry.Wait(ctx, failures) != nil {
				return
			}
			continue
		}
		failures = 0
		for _, st := range res {
			if st.Stream == e.wake {
				if n := len(st.Messages); n > 0 {
					wakeLast = st.Messages[n-1].ID
				}
				continue
			}
			e.dispatch(st, gens[st.Stream])
		}
	}
}

// dispatch hands a stream's new entries, read at watch generation gen, to
// the followers that are before them; a follower that cannot take them is
// dropped. Entries read before the watch was set back are not dispatched:
// they are read again.
func (e *Events) dispatch(st redis.XStream, gen uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.watches[st.Stream]
	if w == nil || w.gen != gen {
		return
	}
	for _, m := range st.Messages {
		w.last = m.ID
		id, ok := parseStreamID(m.ID)
		if !ok {
			continue
		}
		var v any
		decoded := false
		for f := range w.followers {
			if !f.after.before(id) {
				continue // it had this entry
			}
			if !decoded {
				// Once for every follower.
				if v, ok = w.decode(m); !ok {
					break
				}
				decoded = true
			}
			if !f.deliver(v, f.after) {
				delete(w.followers, f)
				f.close()
				continue
			}
			f.after = id
		}
	}
	if len(w.followers) == 0 {
		delete(e.watches, st.Stream)
	}
}

// dropAll closes every follower (Redis failed under them).
func (e *Events) dropAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, w := range e.watches {
		for f := range w.followers {
			f.close()
		}
		delete(e.watches, k)
	}
}

// Stop stops the reader and closes every follower. It is safe to call
// twice, and before Start.
func (e *Events) Stop() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	// Poke: end the blocking read now rather than at its timeout.
	e.lc.stop(e.poke, nil)
	e.dropAll()
}
