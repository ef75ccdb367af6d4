package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// TestClaimCommitsWithoutWaitingForTheDisk checks, on Postgres, that the
// statement a claim runs turns synchronous_commit off for its own
// transaction when it claims a turn, and for that transaction only: the
// set_config in its FROM list must be evaluated (a planner that dropped
// it would make every claim wait for a flush again, silently), and it must
// not outlive the transaction (it would make the connection's later
// commits, an ask's or a finish's, skip their flush).
func TestClaimCommitsWithoutWaitingForTheDisk(t *testing.T) {
	u := os.Getenv("PRCHAT_TEST_DATABASE_URL")
	if u == "" {
		t.Skip("synchronous_commit is Postgres'; set PRCHAT_TEST_DATABASE_URL")
	}
	t.Parallel()
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx := t.Context()
	conn, err := db.Conn(ctx) // one session for the before and the after
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	// show reads the setting in the session (conn) or in a transaction of it
	show := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) string {
		t.Helper()
		var v string
		if err := q.QueryRowContext(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := show(conn)
	if before == "off" {
		t.Skipf("this server commits without waiting for the disk anyway (synchronous_commit %s)", before)
	}

	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	// A turns table of the transaction's own, which the claim's statement
	// finds first on the search path.
	if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE turns (id text PRIMARY KEY, state text, fence bigint,
    runner text, started_at timestamptz, finished_at timestamptz) ON COMMIT DROP`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO turns VALUES ('t1', 'queued', 0, '', NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	if got := show(tx); got != before {
		t.Fatalf("synchronous_commit is %s before the claim, want the session's %s", got, before)
	}
	var fence int64
	if err := tx.QueryRowContext(ctx, numbered(claimUpdateLease+` RETURNING turns.fence`), "worker-1", time.Now(), "t1").Scan(&fence); err != nil {
		t.Fatalf("claim: %v", err)
	}
	if fence != 1 {
		t.Fatalf("the claim took fence %d, want 1", fence)
	}
	if got := show(tx); got != "off" {
		t.Errorf("synchronous_commit is %s in the claim's transaction, want off: the claim waits for the disk", got)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := show(conn); got != before {
		t.Errorf("synchronous_commit is %s after the claim's transaction, want the session's %s back", got, before)
	}
}

// numbered writes the ? placeholders of q as Postgres' $1, $2, ...
func numbered(q string) string {
	var b strings.Builder
	n := 0
	for _, part := range strings.Split(q, "?") {
		if n > 0 {
			fmt.Fprintf(&b, "$%d", n)
		}
		b.WriteString(part)
		n++
	}
	return b.String()
}
