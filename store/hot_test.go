package store_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/store"
	"github.com/prchat/prchat/store/storetest"
)

// TestClaimChangesNoIndexedColumn checks, on Postgres, what a claim and a
// release need to be HOT updates (no index entry, the new version on the
// turn's page): no index of the turns covers or filters on a column they
// set, and the table leaves room on its pages for the new versions.
func TestClaimChangesNoIndexedColumn(t *testing.T) {
	u := os.Getenv(storetest.EnvDatabaseURL)
	if u == "" {
		t.Skip("HOT updates are Postgres'; set " + storetest.EnvDatabaseURL)
	}
	t.Parallel()
	s := storetest.NewPostgres(t, u)
	// ClaimTurn sets these, ReleaseTurn state and runner.
	wantHOTUpdates(t, s, "turns", 4, "a claim", []string{"state", "fence", "runner", "started_at"})
}

// wantHOTUpdates checks that an update of table (which has minIndexes
// indexes at least) setting the columns sets, as what does, can be a HOT
// update: no index covers or filters on one of them, and the table's
// fillfactor leaves room on its pages for the new versions.
func wantHOTUpdates(t *testing.T, s *store.Store, table string, minIndexes int, what string, sets []string) {
	t.Helper()
	db := s.DB().WithContext(t.Context())
	var indexes []struct {
		Name    string
		Columns string // the key columns, comma-separated
		Pred    string // the predicate and expressions, as Postgres prints them
	}
	if err := db.Raw(`SELECT c.relname AS name,
    (SELECT string_agg(a.attname, ',') FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)) AS columns,
    coalesce(pg_get_expr(i.indpred, i.indrelid), '') || ' ' || coalesce(pg_get_expr(i.indexprs, i.indrelid), '') AS pred
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = ?::regclass`, table).Scan(&indexes).Error; err != nil {
		t.Fatal(err)
	}
	if len(indexes) < minIndexes {
		t.Fatalf("%s has %d indexes, want its %d at least: %+v", table, len(indexes), minIndexes, indexes)
	}
	for _, ix := range indexes {
		for _, col := range sets {
			if slices.Contains(strings.Split(ix.Columns, ","), col) || regexp.MustCompile(`\b`+col+`\b`).MatchString(ix.Pred) {
				t.Errorf("index %s (columns %s, %s) covers %s, which %s sets: its updates are not HOT", ix.Name, ix.Columns, ix.Pred, col, what)
			}
		}
	}
	var options []string
	if err := db.Raw(`SELECT unnest(reloptions) FROM pg_class WHERE oid = ?::regclass`, table).Scan(&options).Error; err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(options, func(o string) bool { return strings.HasPrefix(o, "fillfactor=") && o != "fillfactor=100" }) {
		t.Errorf("%s' options %v leave no room on a page for a row's next version", table, options)
	}
}

// TestFinishChangesNoIndexedColumnOfItsConversation checks, on Postgres,
// that a finish's update of the turn's conversation can be a HOT update:
// no index of conversations covers a column FinishTurn sets there, and the
// table leaves room on its pages for the new versions (migration 00010).
func TestFinishChangesNoIndexedColumnOfItsConversation(t *testing.T) {
	u := os.Getenv(storetest.EnvDatabaseURL)
	if u == "" {
		t.Skip("HOT updates are Postgres'; set " + storetest.EnvDatabaseURL)
	}
	t.Parallel()
	s := storetest.NewPostgres(t, u)
	// FinishTurn sets these on the turn's conversation.
	wantHOTUpdates(t, s, "conversations", 2, "a finish",
		[]string{"session_id", "session_host", "run_dir", "backend", "model", "session", "seeded_reason", "updated_at"})

	// The first conversation's page fills with those asked after it; its
	// turn's finish then keeps the conversation's new version on that page.
	ctx := t.Context()
	db := s.DB().WithContext(ctx)
	f := setup(t, s)
	var first chat.Conversation
	var turn chat.Turn
	for i := range 120 {
		c := chat.Conversation{ReviewID: f.review.ID, Title: strings.Repeat("t", 40)}
		tn := chat.Turn{Question: "Why does this lock?"}
		if err := s.CreateConversation(ctx, &c, &tn); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first, turn = c, tn
		}
	}
	page := func() (block int) {
		t.Helper()
		if err := db.Raw(`SELECT (ctid::text::point)[0]::int FROM conversations WHERE id = ?`, first.ID).Scan(&block).Error; err != nil {
			t.Fatal(err)
		}
		return block
	}
	before := page()
	var last int
	if err := db.Raw(`SELECT max((ctid::text::point)[0]::int) FROM conversations`).Scan(&last).Error; err != nil {
		t.Fatal(err)
	}
	if last == before {
		t.Fatalf("all conversations fit on page %d: nothing filled the first one's page", before)
	}
	run := f.claim(t, turn.ID, "w1/1")
	if err := s.FinishTurn(ctx, turn.ID, run.Fence, chat.Outcome{State: chat.StateSucceeded,
		Conversation: &chat.SessionInfo{SessionID: "conv-session", SessionHost: "w1", RunDir: "/runs/c1", Backend: chat.BackendClaudeCode, Model: "opus", Session: chat.SessionForked}}); err != nil {
		t.Fatal(err)
	}
	if after := page(); after != before {
		t.Errorf("the finish moved the conversation from page %d to page %d: no room was left on its page", before, after)
	}
}

// TestPendingIsUnfinished checks that a turn is pending exactly while it
// has no finished_at, which the pending indexes of Postgres rely on: every
// settle sets it, a release keeps it empty, and Postgres refuses a final
// turn without it.
func TestPendingIsUnfinished(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		_, finished := f.converse(t)
		run := f.claim(t, finished.ID, "w1/1")
		if _, err := s.ReleaseTurn(ctx, finished.ID, run.Fence); err != nil {
			t.Fatal(err)
		}
		if got := pendingIDs(t, s); !slices.Contains(got, finished.ID) {
			t.Fatalf("released turn %s not pending: %v", finished.ID, got)
		}
		run = f.claim(t, finished.ID, "w1/2")
		if err := s.FinishTurn(ctx, finished.ID, run.Fence, chat.Outcome{State: chat.StateSucceeded}); err != nil {
			t.Fatal(err)
		}
		_, settled := f.converse(t)
		if _, err := s.SettleTurn(ctx, settled.ID, chat.StateCancelled, chat.ReasonCancelled, "", nil); err != nil {
			t.Fatal(err)
		}
		_, queued := f.converse(t)
		if got := pendingIDs(t, s); !slices.Equal(got, []string{queued.ID}) {
			t.Fatalf("pending turns %v, want only %s", got, queued.ID)
		}
		for _, id := range []string{finished.ID, settled.ID} {
			turn, err := s.TurnByID(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if turn.FinishedAt == nil {
				t.Errorf("turn %s is %s without finished_at", id, turn.State)
			}
		}
		if s.DB().Dialector.Name() == "postgres" {
			err := s.DB().WithContext(ctx).Exec(`UPDATE turns SET state = 'failed' WHERE id = ?`, queued.ID).Error
			if err == nil || !strings.Contains(err.Error(), "turns_pending_unfinished_check") {
				t.Errorf("a final turn without finished_at: error %v, want the check turns_pending_unfinished_check", err)
			}
		}
	})
}

func pendingIDs(t *testing.T, s *store.Store) []string {
	t.Helper()
	turns, err := s.PendingTurns(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, turn := range turns {
		ids = append(ids, turn.ID)
	}
	return ids
}

// TestClaimFindsItsTurnByTheKey checks, on Postgres, that a claim looks its
// turn up in the primary key whatever the planner believes of the pending
// turns' partial indexes: with a backlog that grew after the table was last
// analyzed, a claim that let the planner take the pending index
// (created_at, id) for the id read that index from end to end, a cost in
// proportion to the backlog.
func TestClaimFindsItsTurnByTheKey(t *testing.T) {
	u := os.Getenv(storetest.EnvDatabaseURL)
	if u == "" {
		t.Skip("the plan is Postgres'; set " + storetest.EnvDatabaseURL)
	}
	t.Parallel()
	s := storetest.NewPostgres(t, u)
	db := s.DB().WithContext(t.Context())
	f := setup(t, s)
	if err := db.Exec(`ANALYZE turns`).Error; err != nil {
		t.Fatal(err)
	}
	var last chat.Turn
	for range 200 {
		_, last = f.converse(t)
	}
	q, args := store.ClaimQuery(s, last.ID)
	var plan []string
	if err := db.Raw(`EXPLAIN `+q, args...).Scan(&plan).Error; err != nil {
		t.Fatalf("explain the claim: %v", err)
	}
	if text := strings.Join(plan, "\n"); !strings.Contains(text, "Index Scan using turns_pkey on turns") {
		t.Errorf("the claim does not find its turn by the primary key:\n%s", text)
	}
}

// BenchmarkTurnWrites measures what a turn writes to Postgres as the
// bench's turns do: asked in groups of 200 (so that later asks fill the
// pages of earlier ones before they run), then each claimed with its
// conversation and finished with its conversation's session and three
// events. It reports the write-ahead log per turn (server-wide: run it
// alone) and the share of the conversations' updates that were HOT.
func BenchmarkTurnWrites(b *testing.B) {
	u := os.Getenv(storetest.EnvDatabaseURL)
	if u == "" {
		b.Skip("measures Postgres' write-ahead log; set " + storetest.EnvDatabaseURL)
	}
	s := storetest.NewPostgres(b, u)
	ctx := b.Context()
	db := s.DB().WithContext(ctx)
	f := setup(b, s)
	const group = 200
	var asked []chat.Turn
	lsn := func() (at int64) {
		b.Helper()
		if err := db.Raw(`SELECT pg_current_wal_insert_lsn() - '0/0'`).Scan(&at).Error; err != nil {
			b.Fatal(err)
		}
		return at
	}
	start := lsn()
	turns := 0
	for b.Loop() {
		if len(asked) == 0 {
			for range group {
				c := chat.Conversation{ReviewID: f.review.ID, Title: "Why is this racy", Backend: chat.BackendClaudeCode, Model: "opus"}
				turn := chat.Turn{Question: "Why is this racy?", Focus: &chat.Focus{Kind: chat.FocusSection, ID: "s1"}}
				if err := s.CreateConversation(ctx, &c, &turn); err != nil {
					b.Fatal(err)
				}
				asked = append(asked, turn)
			}
		}
		turn := asked[0]
		asked = asked[1:]
		run, _, err := s.ClaimTurnWithConversation(ctx, turn.ID, "w1/1", nil)
		if err != nil {
			b.Fatal(err)
		}
		at := time.Now()
		o := chat.Outcome{State: chat.StateSucceeded,
			Conversation: &chat.SessionInfo{SessionID: "conv-session", SessionHost: "w1", RunDir: "/runs/c1", Backend: chat.BackendClaudeCode, Model: "opus", Session: chat.SessionForked},
			Events: []chat.Event{
				{Seq: 1, Type: chat.EventState, State: chat.StateRunning, At: at},
				{Seq: 2, Type: chat.EventTextDelta, Text: "It is racy because the lock is taken late.", At: at},
				{Seq: 3, Type: chat.EventDone, State: chat.StateSucceeded, At: at},
			}}
		if err := s.FinishTurn(ctx, turn.ID, run.Fence, o); err != nil {
			b.Fatal(err)
		}
		turns++
	}
	b.ReportMetric(float64(lsn()-start)/float64(turns), "WAL-B/turn")
	// The statistics reach the server's view within moments.
	var hot, all int64
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if err := db.Raw(`SELECT n_tup_hot_upd, n_tup_upd FROM pg_stat_user_tables WHERE relid = 'conversations'::regclass`).Row().Scan(&hot, &all); err != nil {
			b.Fatal(err)
		}
		if all >= int64(turns) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if all > 0 {
		b.ReportMetric(100*float64(hot)/float64(all), "%HOT-conv")
	}
}
