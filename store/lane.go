package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/prchat/prchat/chat/handoff"
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
// A lane has no goroutine of its own: its callers take turns sending the
// batches (a handoff.Line). A lone statement costs no hand-off, and a
// queued one the one wake-up that tells it its outcome.
//
// Every statement of a lane changes one turn and what belongs to it, so
// the turns of a batch are independent: a batch whose transaction a
// statement's error aborted is sent again one statement at a time, so that
// each caller hears of its own statement only. A statement whose fence did
// not match returns no rows, which is not an error: its batch commits the
// others.
//
// A Store on Postgres has one lane for all its runs' statements: their
// claims, events and finishes. A claim is a lease (see claimUpdateLease)
// whose commit need not wait for the disk; an event or a finish must. A
// batch of claims alone commits without waiting (each claim's lease
// variant of its statement turns synchronous_commit off for the batch's
// transaction); a batch with any statement that must wait sends every claim
// in it in its plain variant, so the whole batch waits for one flush, which
// its finishes needed anyway. So no commit that must wait is made not to,
// and the claims and finishes of a process's runs share round trips and
// transactions: with several worker processes on one host, each with a
// share of the load, one lane rather than two is what keeps its batches
// full (see the README's "One lane for a run's statements").
type lane struct {
	pool *sql.DB
	line *handoff.Line[*laneJob]

	mu      sync.Mutex // guards what follows
	batches int64      // sent, for tests
	jobs    int64      // statements sent (one sent again alone counts again)
	leases  int64      // batches sent that committed without waiting for the disk
}

// laneJob is one statement of a lane.
type laneJob struct {
	ctx   context.Context
	query string // with $n placeholders
	// lease, if set, is the statement's variant that makes its transaction
	// commit without waiting for the disk, sent when every statement of a
	// batch has one.
	lease string
	args  []any
	// read reads the statement's rows into the caller's variables. It may
	// be called more than once (a batch that failed is sent again one
	// statement at a time), so each call starts afresh; its results count
	// only once its batch was sent with err nil.
	read func(pgx.Rows) error
	err  error // the statement's outcome, once its batch was sent
}

// newLane returns an idle lane on pool.
func newLane(pool *sql.DB) *lane {
	l := &lane{pool: pool}
	l.line = handoff.New(maxLaneBatch, l.run)
	return l
}

// do runs query (with ? placeholders) with args in the lane's next batch
// and waits until that batch committed, read having read its rows. It gives
// up (with ctx's error) only while the statement still waits for a batch:
// once a batch holds it, its outcome is what the caller must hear.
func (l *lane) do(ctx context.Context, query string, args []any, read func(pgx.Rows) error) error {
	return l.submit(&laneJob{ctx: ctx, query: numberedQuery(query), args: args, read: read})
}

// doLease is do for a statement whose commit need not wait for the disk:
// lease is its variant (with the same placeholders and rows) that says so,
// sent when no statement of its batch must wait.
func (l *lane) doLease(ctx context.Context, query, lease string, args []any, read func(pgx.Rows) error) error {
	return l.submit(&laneJob{ctx: ctx, query: numberedQuery(query), lease: numberedQuery(lease), args: args, read: read})
}

// submit runs j in the lane's next batch (see do).
func (l *lane) submit(j *laneJob) error {
	switch err := l.line.Do(j.ctx, j); {
	case errors.Is(err, handoff.ErrClosed):
		return errStoreClosed
	case err != nil:
		return err // given up while it waited for a batch
	}
	return unavailable(j.err)
}

// run sends a batch, one statement at a time if it fails together, and
// records in each statement how it went.
func (l *lane) run(batch []*laneJob) {
	live := batch[:0:0]
	for _, j := range batch {
		if err := j.ctx.Err(); err != nil {
			j.err = err
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), laneTimeout)
	defer cancel()
	err := l.pipeline(ctx, live)
	// A statement's error aborted the batch's transaction at the server:
	// nothing of it was committed, so each statement can go again alone.
	// Any other error (a connection lost, a row that could not be read)
	// leaves unknown what was committed, so every caller hears it, as the
	// caller of a statement of its own would.
	var pgErr *pgconn.PgError
	alone := err != nil && len(live) > 1 && errors.As(err, &pgErr)
	for _, j := range live {
		if alone {
			j.err = l.pipeline(ctx, []*laneJob{j})
		} else {
			j.err = err
		}
	}
}

// pipeline runs jobs in one pipeline on one connection: a transaction of
// their own, committed at its end (Postgres' implicit transaction of a
// pipeline).
func (l *lane) pipeline(ctx context.Context, jobs []*laneJob) error {
	lease := !slices.ContainsFunc(jobs, func(j *laneJob) bool { return j.lease == "" })
	l.mu.Lock()
	l.batches++
	l.jobs += int64(len(jobs))
	if lease {
		l.leases++
	}
	l.mu.Unlock()
	return withPgx(ctx, l.pool, func(c *pgx.Conn) error {
		b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(jobs))}
		for _, j := range jobs {
			query := j.query
			if lease {
				query = j.lease
			}
			b.Queue(query, j.args...).Query(j.read)
		}
		return c.SendBatch(ctx, b).Close()
	})
}

// withPgx runs fn on a connection of pool, as the pgx connection under
// database/sql's.
func withPgx(ctx context.Context, pool *sql.DB, fn func(*pgx.Conn) error) error {
	conn, err := pool.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(driverConn any) error {
		dc, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("connection is a %T, not pgx's", driverConn)
		}
		return fn(dc.Conn())
	})
}

// counts returns how many batches the lane sent and how many statements
// they carried (a statement sent again alone counts again), for tests.
func (l *lane) counts() (batches, jobs int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.batches, l.jobs
}

// leaseBatches returns how many batches the lane sent that committed
// without waiting for the disk, for tests.
func (l *lane) leaseBatches() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leases
}

// queued is how many statements wait for the next batch, for tests.
func (l *lane) queued() int { return l.line.Queued() }

// close refuses new statements and fails those still queued, then waits
// for the batch under way.
func (l *lane) close() { l.line.Close() }

// numberedQueries caches numberPlaceholders for the lanes. Their
// statements are a few hundred texts at most (a finish's varies with the
// number of its events and whether it updates the conversation's session),
// each sent thousands of times a second: numbering one anew scans and
// copies it, where a look-up only hashes it.
var numberedQueries = &numberedCache{max: 1024}

// numberedCache keeps numbered texts by their query text, at most max of
// them, should a caller ever build texts without end.
type numberedCache struct {
	max  int64
	m    sync.Map // query text -> numbered text
	kept atomic.Int64
}

// numberedQuery is numberPlaceholders(query), from numberedQueries.
func numberedQuery(query string) string { return numberedQueries.get(query) }

// get returns numberPlaceholders(query), from the cache when it is there.
func (c *numberedCache) get(query string) string {
	if n, ok := c.m.Load(query); ok {
		return n.(string)
	}
	n := numberPlaceholders(query)
	if c.kept.Load() < c.max {
		if _, loaded := c.m.LoadOrStore(query, n); !loaded {
			c.kept.Add(1)
		}
	}
	return n
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
// dests (see namedTargets).
func scanNamed(rows pgx.Rows, dests []any, prefixes []string) error {
	return rows.Scan(namedTargets(rows.FieldDescriptions(), dests, prefixes)...)
}

// namedTargets are the scan targets of a result's columns among the
// fields of the structs dests: each column goes into the field whose gorm
// column name it is (for the struct at index i, prefixed by prefixes[i]);
// a column no field names is read and dropped. A result of many rows
// computes them once and scans every row into them.
func namedTargets(fields []pgconn.FieldDescription, dests []any, prefixes []string) []any {
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
	return targets
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
