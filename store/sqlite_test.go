package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"modernc.org/sqlite"
)

// openTestPool opens a one-connection caching pool on a fresh file with a
// table t(id, v).
func openTestPool(t testing.TB) *sql.DB {
	t.Helper()
	db, err := openSQLitePool(filepath.Join(t.TempDir(), "t.db") + "?_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// cached returns the queries the pool's connection keeps prepared.
func cached(t *testing.T, db *sql.DB) []string {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var out []string
	if err := conn.Raw(func(dc any) error {
		for e := dc.(*cachingConn).lru.Front(); e != nil; e = e.Next() {
			out = append(out, e.Value.(*cachedStmt).query)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSQLiteStatementCache: a statement is prepared once per connection and
// reused by single statements and transactions alike, with its arguments
// bound afresh every time.
func TestSQLiteStatementCache(t *testing.T) {
	db := openTestPool(t)
	const insert = `INSERT INTO t (id, v) VALUES (?, ?) RETURNING v`
	for i := range 10 {
		var v string
		if err := db.QueryRow(insert, i, fmt.Sprint("v", i)).Scan(&v); err != nil || v != fmt.Sprint("v", i) {
			t.Fatalf("insert %d: %q, %v", i, v, err)
		}
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 20; i++ {
		if _, err := tx.Exec(insert, i, fmt.Sprint("v", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM t WHERE v LIKE 'v%'`).Scan(&n); err != nil || n != 20 {
		t.Fatalf("count = %d, %v; want 20", n, err)
	}
	got := cached(t, db)
	if len(got) != 3 || got[0] != `SELECT count(*) FROM t WHERE v LIKE 'v%'` || got[1] != insert {
		t.Errorf("cached statements = %q, want the count, the insert, the CREATE TABLE, once each", got)
	}
}

// TestSQLiteStatementCacheWhileRowsAreOpen: a query run again while rows of
// its cached statement are still being read gets rows of its own.
func TestSQLiteStatementCacheWhileRowsAreOpen(t *testing.T) {
	db := openTestPool(t)
	for i := range 3 {
		if _, err := db.Exec(`INSERT INTO t (id, v) VALUES (?, ?)`, i, fmt.Sprint("v", i)); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.Begin() // one connection for both queries
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	const q = `SELECT v FROM t WHERE id >= ? ORDER BY id`
	outer, err := tx.Query(q, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for outer.Next() {
		var v string
		if err := outer.Scan(&v); err != nil {
			t.Fatal(err)
		}
		var inner []string
		rows, err := tx.Query(q, 2)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var w string
			_ = rows.Scan(&w)
			inner = append(inner, w)
		}
		rows.Close()
		got = append(got, fmt.Sprint(v, inner))
	}
	if err := outer.Err(); err != nil {
		t.Fatal(err)
	}
	outer.Close()
	if want := "[v0[v2] v1[v2] v2[v2]]"; fmt.Sprint(got) != want {
		t.Errorf("nested reads = %v, want %s", got, want)
	}
}

// TestSQLiteStatementCacheIsBounded: past statementsPerConn distinct
// statements the least recently used are finalized.
func TestSQLiteStatementCacheIsBounded(t *testing.T) {
	db := openTestPool(t)
	for i := range statementsPerConn + 20 {
		if _, err := db.Exec(fmt.Sprintf(`SELECT %d FROM t`, i)); err != nil {
			t.Fatal(err)
		}
	}
	got := cached(t, db)
	if len(got) != statementsPerConn || got[0] != fmt.Sprintf(`SELECT %d FROM t`, statementsPerConn+19) {
		t.Errorf("%d statements cached, newest %q; want %d, newest last run", len(got), got[0], statementsPerConn)
	}
}

// BenchmarkSQLiteUpdateReturning runs a turn-sized UPDATE ... RETURNING in
// a transaction through the caching pool and through modernc's plain
// driver, which compiles the statement every time.
func BenchmarkSQLiteUpdateReturning(b *testing.B) {
	const update = `UPDATE t SET v = ?, id = id WHERE id = ? AND v <> '' RETURNING id, v`
	run := func(b *testing.B, db *sql.DB) {
		if _, err := db.Exec(`INSERT INTO t (id, v) VALUES (1, 'a')`); err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			var id int
			var v string
			if err := tx.QueryRowContext(ctx, update, "b", 1).Scan(&id, &v); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("cached", func(b *testing.B) { run(b, openTestPool(b)) })
	b.Run("plain", func(b *testing.B) {
		c, err := sqlite.NewConnector(filepath.Join(b.TempDir(), "t.db") + "?_pragma=journal_mode(WAL)&_txlock=immediate")
		if err != nil {
			b.Fatal(err)
		}
		db := sql.OpenDB(c)
		defer db.Close()
		db.SetMaxOpenConns(1)
		if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
			b.Fatal(err)
		}
		run(b, db)
	})
}
