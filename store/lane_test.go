package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/prchat/prchat/chat/chattest"
)

// laneDB returns a pool on Postgres whose connections work in a schema of
// the test's own, holding a table t (k text primary key), dropped when
// the test ends; the test is skipped without Postgres.
func laneDB(t *testing.T) *sql.DB {
	t.Helper()
	u := os.Getenv("PRCHAT_TEST_DATABASE_URL")
	if u == "" {
		t.Skip("lanes are Postgres'; set PRCHAT_TEST_DATABASE_URL")
	}
	schema := "lane_" + uuid.NewString()[:8]
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	admin := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = admin.Close() })
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema + `; CREATE TABLE ` + schema + `.t (k text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`) })
	cfg.RuntimeParams["search_path"] = schema
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// insertJob inserts k into t through l and returns the id of the
// transaction that did, as its read saw it.
func insertJob(ctx context.Context, l *lane, k string) (xid int64, err error) {
	err = l.do(ctx, `INSERT INTO t (k) VALUES (?) RETURNING txid_current()`, []any{k}, func(r pgx.Rows) error {
		xid = 0
		for r.Next() {
			if err := r.Scan(&xid); err != nil {
				return err
			}
		}
		return r.Err()
	})
	return xid, err
}

// holdLane sends a statement that keeps l's writer busy until release is
// closed (a lock the statement waits for), so that what is submitted
// meanwhile queues for the next batch. It returns when that statement is
// at the server, and a wait for its own outcome.
func holdLane(t *testing.T, db *sql.DB, l *lane) (release func(), wait func() error) {
	t.Helper()
	ctx := t.Context()
	key := rand.Int32N(1 << 30) // the tests' own lock: they run side by side
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() {
		held <- l.do(ctx, `SELECT pg_advisory_xact_lock(?)`, []any{key}, func(r pgx.Rows) error {
			for r.Next() {
			}
			return r.Err()
		})
	}()
	chattest.Eventually(t, "the holding statement waits at the server", func() bool {
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 0 AND objid = $1 AND NOT granted`, key).Scan(&n)
		return err == nil && n == 1
	})
	release = func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key)
		_ = conn.Close()
	}
	return release, func() error { return <-held }
}

// TestLaneCommitsWhatArrivedMeanwhileTogether: statements submitted while
// the lane's batch is at the database go in one batch, one round trip and
// one transaction, and each caller reads its own statement's rows.
func TestLaneCommitsWhatArrivedMeanwhileTogether(t *testing.T) {
	t.Parallel()
	db := laneDB(t)
	l := newLane(db)
	defer l.close()
	ctx := t.Context()

	release, held := holdLane(t, db, l)
	const n = 10
	xids := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { xids[i], errs[i] = insertJob(ctx, l, fmt.Sprint("k", i)) })
	}
	chattest.Eventually(t, "the statements queue behind the held batch", func() bool { return l.queued() == n })
	release()
	wg.Wait()
	if err := held(); err != nil {
		t.Fatalf("holding statement: %v", err)
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("statement %d: %v", i, errs[i])
		}
		if xids[i] == 0 || xids[i] != xids[0] {
			t.Fatalf("transactions %v: want one for all %d statements", xids, n)
		}
	}
	if batches, jobs := l.counts(); batches != 2 || jobs != n+1 {
		t.Errorf("%d batches of %d statements; want 2 of %d (the held one, then all the others)", batches, jobs, n+1)
	}
	var rows int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&rows); err != nil || rows != n {
		t.Errorf("%d rows stored (%v), want %d", rows, err, n)
	}
}

// TestLaneSendsAFailedBatchAgainAlone: a statement that fails aborts its
// batch's transaction; the lane then sends each statement of the batch
// again alone, so that only the failing one fails and the others are
// committed, each reading its own rows afresh.
func TestLaneSendsAFailedBatchAgainAlone(t *testing.T) {
	t.Parallel()
	db := laneDB(t)
	l := newLane(db)
	defer l.close()
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `INSERT INTO t VALUES ('taken')`); err != nil {
		t.Fatal(err)
	}

	release, held := holdLane(t, db, l)
	keys := []string{"a", "taken", "b"}
	xids := make([]int64, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		// In this order: a before the failing statement, b after it.
		chattest.Eventually(t, "the statements before it queue", func() bool { return l.queued() == i })
		wg.Go(func() { xids[i], errs[i] = insertJob(ctx, l, k) })
	}
	chattest.Eventually(t, "the statements queue behind the held batch", func() bool { return l.queued() == len(keys) })
	release()
	wg.Wait()
	if err := held(); err != nil {
		t.Fatalf("holding statement: %v", err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(errs[1], &pgErr) || pgErr.Code != "23505" {
		t.Errorf("the duplicate key's statement: %v, want a unique violation", errs[1])
	}
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("the good statements: %v, %v; want both committed", errs[0], errs[2])
	}
	if xids[0] == 0 || xids[2] == 0 || xids[0] == xids[2] {
		t.Errorf("the good statements read transactions %d and %d; want one each, sent alone", xids[0], xids[2])
	}
	var stored []string
	rows, err := db.QueryContext(ctx, `SELECT k FROM t ORDER BY k`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, k)
	}
	if fmt.Sprint(stored) != "[a b taken]" {
		t.Errorf("stored %v, want [a b taken]", stored)
	}
	// The held batch, the batch of three, then each of the three alone.
	if batches, jobs := l.counts(); batches != 5 || jobs != 7 {
		t.Errorf("%d batches of %d statements; want 5 of 7", batches, jobs)
	}
}

// TestLaneAfterCloseFails: a closed lane refuses at once, and a statement
// racing with close is answered either way, never left waiting.
func TestLaneAfterCloseFails(t *testing.T) {
	t.Parallel()
	db := laneDB(t)
	l := newLane(db)
	ctx := t.Context()
	done := make(chan error, 50)
	for i := range cap(done) {
		go func() {
			_, err := insertJob(ctx, l, fmt.Sprint("k", i))
			done <- err
		}()
	}
	l.close()
	deadline := time.After(chattest.Patience())
	for range cap(done) {
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, errStoreClosed) {
				t.Errorf("a statement racing with close: %v", err)
			}
		case <-deadline:
			t.Fatal("a statement racing with close was never answered")
		}
	}
	if _, err := insertJob(ctx, l, "late"); !errors.Is(err, errStoreClosed) {
		t.Errorf("a statement after close: %v, want %v", err, errStoreClosed)
	}
}

// TestNumberPlaceholders: gorm's ? placeholders become $1, $2, ... in
// order; a ? in a quoted literal or name stays.
func TestNumberPlaceholders(t *testing.T) {
	for in, want := range map[string]string{
		`SELECT ?`:                               `SELECT $1`,
		`UPDATE t SET a = ?, b = ? WHERE id = ?`: `UPDATE t SET a = $1, b = $2 WHERE id = $3`,
		`SELECT '?', ?::text, "a?b" FROM t`:      `SELECT '?', $1::text, "a?b" FROM t`,
		`SELECT 'it''s ?', ?`:                    `SELECT 'it''s ?', $1`,
		`SELECT 1`:                               `SELECT 1`,
	} {
		if got := numberPlaceholders(in); got != want {
			t.Errorf("numberPlaceholders(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNumberedQueryKeepsABoundedCache: a numberedCache numbers as
// numberPlaceholders does, from its cache the second time, and keeps no
// more than its bound however many texts it is given.
func TestNumberedQueryKeepsABoundedCache(t *testing.T) {
	c := &numberedCache{max: 8}
	q := `UPDATE t SET a = ?, b = '?' WHERE id = ?`
	if got, want := c.get(q), numberPlaceholders(q); got != want {
		t.Fatalf("get(%q) = %q, want %q", q, got, want)
	}
	if _, ok := c.m.Load(q); !ok {
		t.Fatal("a numbered text was not kept")
	}
	for i := range 20 {
		c.get(fmt.Sprintf("SELECT ? -- text %d", i))
	}
	kept := 0
	c.m.Range(func(any, any) bool { kept++; return true })
	if kept != 8 {
		t.Errorf("kept %d numbered texts, want the bound, 8", kept)
	}
	if got, want := c.get("SELECT ?, ? -- beyond the bound"), "SELECT $1, $2 -- beyond the bound"; got != want {
		t.Errorf("beyond the bound: %q, want %q", got, want)
	}
}

// BenchmarkNumberedQuery measures what a finish's statement text costs the
// lane before it is sent: numbered anew, or looked up.
func BenchmarkNumberedQuery(b *testing.B) {
	var q strings.Builder
	q.WriteString(`WITH t AS (UPDATE turns SET state = ?, reason = ?, answer = ?, note = ?, backend = ?, model = ?, session = ?,
    input_tokens = ?, output_tokens = ?, calls = ?, repairs = ?, cost_usd = ?, cost_reason = ?, finished_at = ?, `)
	q.WriteString(lastSeqAtLeast + ` WHERE id = ? AND fence = ? AND state = 'running' RETURNING conversation_id),
c AS (UPDATE conversations SET updated_at = ? FROM t WHERE conversations.id = t.conversation_id RETURNING 1),
`)
	insertEventsCTE(&q, make([]turnEventRow, 3))
	q.WriteString(`
SELECT conversation_id FROM t`)
	text := q.String()
	b.Run("numbered", func(b *testing.B) {
		for b.Loop() {
			numberPlaceholders(text)
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := &numberedCache{max: 1}
		c.get(text)
		// A caller builds its text anew each time: the same bytes
		// elsewhere in memory, compared in full.
		again := strings.Clone(text)
		for b.Loop() {
			c.get(again)
		}
	})
}

// TestLaneStatementGivenUpWhileQueued: a statement whose caller's context
// ends while it waits for a batch is taken out of the queue and never
// sent; the caller hears its context's error.
func TestLaneStatementGivenUpWhileQueued(t *testing.T) {
	t.Parallel()
	db := laneDB(t)
	l := newLane(db)
	defer l.close()
	release, held := holdLane(t, db, l)
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := insertJob(ctx, l, "given-up")
		gaveUp <- err
	}()
	chattest.Eventually(t, "the statement queues", func() bool { return l.queued() == 1 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("the given-up statement: %v, want %v", err, context.Canceled)
	}
	if n := l.queued(); n != 0 {
		t.Errorf("%d statements still queued", n)
	}
	release()
	if err := held(); err != nil {
		t.Fatalf("holding statement: %v", err)
	}
	if _, err := insertJob(t.Context(), l, "after"); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM t WHERE k = 'given-up'`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("the given-up statement stored %d rows (%v)", rows, err)
	}
	if batches, jobs := l.counts(); batches != 2 || jobs != 2 {
		t.Errorf("%d batches of %d statements; want 2 of 2 (the held one, then the one after)", batches, jobs)
	}
}

// TestLaneLeasesWaitForTheDiskOnlyWithOthers: a batch of leases alone
// sends each one's lease variant (its transaction commits without waiting
// for the disk); a batch that also holds a statement that must wait sends
// every lease in its plain variant, so that statement's commit still waits.
func TestLaneLeasesWaitForTheDiskOnlyWithOthers(t *testing.T) {
	t.Parallel()
	db := laneDB(t)
	var session string
	if err := db.QueryRowContext(t.Context(), `SELECT current_setting('synchronous_commit')`).Scan(&session); err != nil {
		t.Fatal(err)
	}
	if session == "off" {
		t.Skipf("this server commits without waiting for the disk anyway (synchronous_commit %s)", session)
	}
	ctx := t.Context()
	// read reads the one text a statement returns.
	read := func(v *string) func(pgx.Rows) error {
		return func(r pgx.Rows) error {
			*v = ""
			for r.Next() {
				if err := r.Scan(v); err != nil {
					return err
				}
			}
			return r.Err()
		}
	}
	const (
		plain = `SELECT 'plain:' || ? || ':' || current_setting('synchronous_commit')`
		lease = `SELECT 'lease:' || ? || ':' || set_config('synchronous_commit', 'off', true)`
		must  = `SELECT 'must:' || ? || ':' || current_setting('synchronous_commit')`
	)

	for _, tc := range []struct {
		name   string
		leases int  // leases submitted while the lane is held
		must   bool // and a statement that must wait
		want   []string
	}{
		{name: "leases alone", leases: 3, want: []string{"lease:0:off", "lease:1:off", "lease:2:off"}},
		{name: "leases with a write", leases: 2, must: true, want: []string{"plain:0:" + session, "plain:1:" + session, "must:2:" + session}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLane(db)
			defer l.close()
			release, held := holdLane(t, db, l)
			n := tc.leases
			if tc.must {
				n++
			}
			got := make([]string, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range tc.leases {
				wg.Go(func() { errs[i] = l.doLease(ctx, plain, lease, []any{fmt.Sprint(i)}, read(&got[i])) })
			}
			if tc.must {
				// After the leases, so that none of them leads a batch of
				// its own.
				chattest.Eventually(t, "the leases queue", func() bool { return l.queued() == tc.leases })
				wg.Go(func() { errs[n-1] = l.do(ctx, must, []any{fmt.Sprint(n - 1)}, read(&got[n-1])) })
			}
			chattest.Eventually(t, "the statements queue behind the held batch", func() bool { return l.queued() == n })
			release()
			wg.Wait()
			if err := held(); err != nil {
				t.Fatalf("holding statement: %v", err)
			}
			for i, err := range errs {
				if err != nil {
					t.Fatalf("statement %d: %v", i, err)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("what each statement read (-want +got):\n%s", diff)
			}
			wantLeases := int64(0)
			if !tc.must {
				wantLeases = 1
			}
			if batches, _ := l.counts(); batches != 2 || l.leaseBatches() != wantLeases {
				t.Errorf("%d batches, %d of them without waiting for the disk; want 2 (the held one, then the others), %d", batches, l.leaseBatches(), wantLeases)
			}
		})
	}
}
