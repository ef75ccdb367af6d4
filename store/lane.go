package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// maxLaneBatch is the most statements one batch of a lane carries.
const maxLaneBatch = 64

// laneTimeout bounds a lane's batch: it runs for all its callers, so under
// none's context.
const laneTimeout = 30 * time.Second

// A lane sends the statements of the runs of turns to Postgres in batches:
// the statements submitted while its last batch was at the database go
// together in the next, in one round trip (pgx's pipeline) and one
// transaction with one commit. A caller waits for nobody: a batch is
// whatever arrived meanwhile, so a lone statement goes at once, and under
// load a batch of runs pays for one round trip and one flush of the
// write-ahead log. That commit, with its context switches on both sides,
// not the statements, is what a claim or a finish costs Postgres.
//
// Every statement of a lane changes one turn and what belongs to it, so
// the turns of a batch are independent: a batch whose transaction a
// statement's error aborted is sent again one statement at a time, so that
// each caller hears of its own statement only. A
// statement whose fence did not match returns no rows, which is not an
// error: its batch commits the others.
//
// A Store on Postgres has two lanes: claims, whose transactions commit
// without waiting for the disk (see claimUpdateLease), and the writes that
// must wait for it (a run's events, its finish). They never share a batch,
// so that no commit that must wait is made not to.
type lane struct {
	pool  *sql.DB
	queue chan *laneJob
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once

	// mu orders submits before close: once closed is set no job enters the
	// queue, so the jobs close drains are all there are.
	mu     sync.RWMutex
	closed bool

	mu2     sync.Mutex // guards the counts
	batches int64
	jobs    int64
}

// laneJob is one statement of a lane.
type laneJob struct {
	ctx   context.Context
	query string // with $n placeholders
	args  []any
	// read reads the statement's rows into the caller's variables. It may
	// be called more than once (a batch that failed is sent again one
	// statement at a time), so each call starts afresh; its results count
	// only once done is closed with err nil.
	read func(pgx.Rows) error
	err  error
	done chan struct{}
}

// startLane starts a lane on pool whose writers send batches side by side.
func startLane(pool *sql.DB, writers int) *lane {
	l := &lane{pool: pool, queue: make(chan *laneJob, maxLaneBatch), stop: make(chan struct{})}
	for range writers {
		l.wg.Go(l.write)
	}
	return l
}

// do runs query (with ? placeholders) with args in the lane's next batch
// and waits until that batch committed, read having read its rows. It gives
// up (with ctx's error) only while the statement still waits for a batch:
// once a batch holds it, its outcome is what the caller must hear.
func (l *lane) do(ctx context.Context, query string, args []any, read func(pgx.Rows) error) error {
	j := &laneJob{ctx: ctx, query: numberPlaceholders(query), args: args, read: read, done: make(chan struct{})}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return errStoreClosed
	}
	select {
	case l.queue <- j:
	case <-ctx.Done():
		l.mu.RUnlock()
		return ctx.Err()
	}
	l.mu.RUnlock()
	<-j.done
	return unavailable(j.err)
}

// write sends batches of what is waiting until the lane stops.
func (l *lane) write() {
	batch := make([]*laneJob, 0, maxLaneBatch)
	for {
		select {
		case <-l.stop:
			return
		case j := <-l.queue:
			batch = append(batch[:0], j)
		}
	more:
		for len(batch) < maxLaneBatch {
			select {
			case j := <-l.queue:
				batch = append(batch, j)
			default:
				break more
			}
		}
		l.run(batch)
	}
}

// run sends a batch, one statement at a time if it fails together, and
// tells every caller how its statement went.
func (l *lane) run(batch []*laneJob) {
	live := batch[:0:0]
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.err = err
			close(j.done)
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), laneTimeout)
	defer cancel()
	err := l.send(ctx, live)
	// A statement's error aborted the batch's transaction at the server:
	// nothing of it was committed, so each statement can go again alone.
	// Any other error (a connection lost, a row that could not be read)
	// leaves unknown what was committed, so every caller hears it, as the
	// caller of a statement of its own would.
	var pgErr *pgconn.PgError
	alone := err != nil && len(live) > 1 && errors.As(err, &pgErr)
	for _, j := range live {
		if alone {
			j.err = l.send(ctx, []*laneJob{j})
		} else {
			j.err = err
		}
		close(j.done)
	}
}

// send runs jobs in one pipeline on one connection: a transaction of their
// own, committed at its end (Postgres' implicit transaction of a pipeline).
func (l *lane) send(ctx context.Context, jobs []*laneJob) error {
	l.mu2.Lock()
	l.batches++
	l.jobs += int64(len(jobs))
	l.mu2.Unlock()
	conn, err := l.pool.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(driverConn any) error {
		dc, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("lane: connection is a %T, not pgx's", driverConn)
		}
		b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(jobs))}
		for _, j := range jobs {
			b.Queue(j.query, j.args...).Query(j.read)
		}
		return dc.Conn().SendBatch(ctx, b).Close()
	})
}

// counts returns how many batches the lane sent and how many statements
// they carried (a statement sent again alone counts again), for tests.
func (l *lane) counts() (batches, jobs int64) {
	l.mu2.Lock()
	defer l.mu2.Unlock()
	return l.batches, l.jobs
}

// close stops the lane once it finished the batch it holds; statements
// still queued are told the store is closed.
func (l *lane) close() {
	l.once.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		close(l.stop)
		l.wg.Wait()
		for {
			select {
			case j := <-l.queue:
				j.err = errStoreClosed
				close(j.done)
			default:
				return
			}
		}
	})
}

// numberPlaceholders turns the ? placeholders of query, as gorm writes
// them, into Postgres' $1, $2, ...; a ? inside a quoted literal or name
// stays.
func numberPlaceholders(query string) string {
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// scanNamed reads the current row of rows into the fields of the structs
// dests, each column into the field whose gorm column name it is (for the
// struct at index i, prefixed by prefixes[i]); a column no field names is
// read and dropped.
func scanNamed(rows pgx.Rows, dests []any, prefixes []string) error {
	fields := rows.FieldDescriptions()
	targets := make([]any, len(fields))
	for i, fd := range fields {
		for k, d := range dests {
			if p := columnField(d, prefixes[k], fd.Name); p != nil {
				targets[i] = p
				break
			}
		}
		if targets[i] == nil {
			targets[i] = new(any)
		}
	}
	return rows.Scan(targets...)
}

// columnField returns a pointer to the field of the struct *dest whose
// gorm column name, prefixed by prefix, is name; nil if none is.
func columnField(dest any, prefix, name string) any {
	if !strings.HasPrefix(name, prefix) {
		return nil
	}
	v := reflect.ValueOf(dest).Elem()
	idx, ok := columnIndex(v.Type())[name[len(prefix):]]
	if !ok {
		return nil
	}
	return v.FieldByIndex(idx).Addr().Interface()
}

// columnIndexes caches columnIndex by struct type.
var columnIndexes sync.Map // reflect.Type -> map[string][]int

// columnIndex maps the gorm column names of struct type t's fields,
// embedded structs included (with their embeddedPrefix), to their index
// paths.
func columnIndex(t reflect.Type) map[string][]int {
	if m, ok := columnIndexes.Load(t); ok {
		return m.(map[string][]int)
	}
	m := map[string][]int{}
	var walk func(t reflect.Type, prefix string, path []int)
	walk = func(t reflect.Type, prefix string, path []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			p := append(append([]int{}, path...), i)
			tag := gormTag(f.Tag.Get("gorm"))
			if _, ok := tag["embedded"]; ok {
				walk(f.Type, prefix+tag["embeddedprefix"], p)
				continue
			}
			if col, ok := tag["column"]; ok {
				m[prefix+col] = p
			}
		}
	}
	walk(t, "", nil)
	columnIndexes.Store(t, m)
	return m
}

// gormTag parses a gorm struct tag ("column:id;primaryKey") into its
// settings, keys lower-cased.
func gormTag(tag string) map[string]string {
	m := map[string]string{}
	for part := range strings.SplitSeq(tag, ";") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, ":")
		m[strings.ToLower(strings.TrimSpace(k))] = v
	}
	return m
}

// laneWriters is how many batches of a lane may be at the database at once.
var laneWriters = 1
