package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/store"
	"github.com/prchat/prchat/store/storetest"
)

// fixture is a store with a registered repository and a first review of
// its PR 7.
type fixture struct {
	s      *store.Store
	repo   chat.Repository
	review chat.Review
}

func setup(t testing.TB, s *store.Store) fixture {
	t.Helper()
	ctx := t.Context()
	f := fixture{s: s, repo: chat.Repository{Name: "octo/widgets", ClonePath: "/srv/git/widgets"}}
	if _, err := s.UpsertRepository(ctx, &f.repo); err != nil {
		t.Fatal(err)
	}
	f.review = chat.Review{
		Repository: f.repo.Name, PR: 7, HeadSHA: "h1", BaseSHA: "b1",
		Backend: chat.BackendClaudeCode, Model: "opus", SessionID: "rev-session", SessionHost: "w1",
		RunDir: "/runs/r1", Markdown: "# Review",
		Sections: []chat.Section{{ID: "s1", Title: "Locking", Markdown: "racy", Anchors: []chat.Anchor{{Path: "a.go", StartLine: 3, EndLine: 9}}}},
	}
	if err := s.CreateReview(ctx, &f.review); err != nil {
		t.Fatal(err)
	}
	return f
}

// converse starts a conversation on the fixture's review with a queued first turn.
func (f fixture) converse(t *testing.T) (chat.Conversation, chat.Turn) {
	t.Helper()
	c := chat.Conversation{ReviewID: f.review.ID, Title: "Why is this racy", Backend: chat.BackendClaudeCode, Model: "opus"}
	turn := chat.Turn{Question: "Why is this racy?", Focus: &chat.Focus{Kind: chat.FocusSection, ID: "s1"}}
	if err := f.s.CreateConversation(t.Context(), &c, &turn); err != nil {
		t.Fatal(err)
	}
	return c, turn
}

// claim claims turn id for runner r, failing the test on error.
func (f fixture) claim(t *testing.T, id, runner string) chat.Turn {
	t.Helper()
	turn, err := f.s.ClaimTurn(t.Context(), id, runner, nil)
	if err != nil {
		t.Fatal(err)
	}
	return turn
}

func wantCode(t *testing.T, err error, code chat.Code) {
	t.Helper()
	if got := chat.ErrorCode(err); got != code {
		t.Fatalf("error %v: code %q, want %q", err, got, code)
	}
}

func wantIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

func textEvent(seq int64, text string) chat.Event {
	return chat.Event{Seq: seq, Type: chat.EventTextDelta, Text: text, At: time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)}
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := setup(t, s)
		for range 2 {
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatalf("migrate again: %v", err)
			}
		}
		if _, err := s.ReviewByID(t.Context(), f.review.ID); err != nil {
			t.Fatalf("data after migrating again: %v", err)
		}
		if err := s.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOpenRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []store.Config{
		{},
		{DatabaseURL: "mysql://localhost/x"},
		{SQLitePath: ":memory:"},
		{SQLitePath: filepath.Join(t.TempDir(), "x.db?mode=ro")},
		{SQLitePath: filepath.Join(t.TempDir(), "x.db"), MaxOpenConns: -1},
	} {
		if s, err := store.Open(t.Context(), cfg); err == nil {
			s.Close()
			t.Errorf("Open(%+v) succeeded, want an error", cfg)
		}
	}
}

func TestSQLiteFileSurvivesReopen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := store.Config{SQLitePath: filepath.Join(t.TempDir(), "prchat.db")}
	s, err := store.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	r := chat.Repository{Name: "octo/widgets"}
	if _, err := s.UpsertRepository(ctx, &r); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	s, err = store.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.Repository(ctx, r.Name)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("repository after reopen (-want +got):\n%s", diff)
	}
}

func TestRepositories(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		b := chat.Repository{Name: "octo/b", ClonePath: "/b"}
		created, err := s.UpsertRepository(ctx, &b)
		if err != nil || !created {
			t.Fatalf("upsert new: created %v, err %v", created, err)
		}
		if b.ID == 0 || b.CreatedAt.IsZero() {
			t.Fatalf("upsert did not fill id and time: %+v", b)
		}
		a := chat.Repository{Name: "octo/a", CloneURL: "https://example.com/octo/a.git"}
		if _, err := s.UpsertRepository(ctx, &a); err != nil {
			t.Fatal(err)
		}

		again := chat.Repository{Name: "octo/b", ClonePath: "/b2", CloneURL: "https://example.com/octo/b.git"}
		created, err = s.UpsertRepository(ctx, &again)
		if err != nil || created {
			t.Fatalf("upsert existing: created %v, err %v", created, err)
		}
		want := chat.Repository{ID: b.ID, Name: "octo/b", ClonePath: "/b2", CloneURL: "https://example.com/octo/b.git", CreatedAt: b.CreatedAt}
		if diff := cmp.Diff(want, again); diff != "" {
			t.Errorf("upserted repository (-want +got):\n%s", diff)
		}
		got, err := s.Repository(ctx, "octo/b")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Repository (-want +got):\n%s", diff)
		}

		list, err := s.Repositories(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]chat.Repository{a, want}, list); diff != "" {
			t.Errorf("Repositories (-want +got):\n%s", diff)
		}

		_, err = s.Repository(ctx, "octo/nope")
		wantCode(t, err, chat.CodeRepositoryNotFound)
	})
}

func TestReviewVersions(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		if f.review.Version != 1 || f.review.ID == 0 || f.review.RepositoryID != f.repo.ID || f.review.CreatedAt.IsZero() {
			t.Fatalf("first review not filled in: %+v", f.review)
		}
		v2 := chat.Review{RepositoryID: f.repo.ID, PR: 7, HeadSHA: "h2", Markdown: "# Again"}
		if err := s.CreateReview(ctx, &v2); err != nil {
			t.Fatal(err)
		}
		if v2.Version != 2 || v2.Repository != f.repo.Name {
			t.Fatalf("second review: version %d repository %q, want 2 %q", v2.Version, v2.Repository, f.repo.Name)
		}
		other := chat.Review{Repository: f.repo.Name, PR: 8}
		if err := s.CreateReview(ctx, &other); err != nil {
			t.Fatal(err)
		}
		if other.Version != 1 {
			t.Fatalf("first review of another PR has version %d, want 1", other.Version)
		}

		latest, err := s.Review(ctx, f.repo.Name, 7, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(v2, latest); diff != "" {
			t.Errorf("latest review (-want +got):\n%s", diff)
		}
		first, err := s.Review(ctx, f.repo.Name, 7, 1)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(f.review, first); diff != "" {
			t.Errorf("review version 1 (-want +got):\n%s", diff)
		}
		byID, err := s.ReviewByID(ctx, v2.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(v2, byID); diff != "" {
			t.Errorf("ReviewByID (-want +got):\n%s", diff)
		}
		list, err := s.Reviews(ctx, f.repo.Name, 7)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]chat.Review{f.review, v2}, list); diff != "" {
			t.Errorf("Reviews (-want +got):\n%s", diff)
		}
		none, err := s.Reviews(ctx, f.repo.Name, 99)
		if err != nil || len(none) != 0 {
			t.Errorf("Reviews of a PR without any: %v, %v; want none", none, err)
		}
	})
}

func TestCreateReviewConcurrently(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := setup(t, s)
		const n = 8
		versions := make([]int, n)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				r := chat.Review{Repository: f.repo.Name, PR: 42, HeadSHA: fmt.Sprint(i)}
				if err := s.CreateReview(t.Context(), &r); err != nil {
					errs <- err
					return
				}
				versions[i] = r.Version
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		slices.Sort(versions)
		if diff := cmp.Diff([]int{1, 2, 3, 4, 5, 6, 7, 8}, versions); diff != "" {
			t.Errorf("versions (-want +got):\n%s", diff)
		}
	})
}

// TestCreateFirstReviewConcurrently: of calls racing to make the first
// review of a PR (as webhook questions on an unreviewed PR do, from any
// number of processes: each call here runs on its own connection), one
// creates version 1 and every other gets it; a PR with a review gets its
// latest, and nothing is created.
func TestCreateFirstReviewConcurrently(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := setup(t, s)
		const n = 8
		got := make([]chat.Review, n)
		created := make([]bool, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				<-start
				r := chat.Review{Repository: f.repo.Name, PR: 43, HeadSHA: fmt.Sprint("head-", i)}
				c, err := s.CreateFirstReview(t.Context(), &r)
				if err != nil {
					errs <- err
					return
				}
				got[i], created[i] = r, c
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		makers := 0
		for i := range n {
			if created[i] {
				makers++
			}
			if got[i].Version != 1 || got[i].ID != got[0].ID || got[i].HeadSHA != got[0].HeadSHA || got[i].Repository != f.repo.Name {
				t.Errorf("call %d got %+v, want version 1 as call 0 got it (%+v)", i, got[i], got[0])
			}
		}
		if makers != 1 {
			t.Errorf("%d calls created the review, want 1", makers)
		}
		if all, err := s.Reviews(t.Context(), f.repo.Name, 43); err != nil || len(all) != 1 {
			t.Errorf("PR 43 has %d review versions (%v), want 1", len(all), err)
		}
		// A PR with a review (version 1 of PR 7, recorded by setup) gets
		// it back.
		r := chat.Review{Repository: f.repo.Name, PR: 7, HeadSHA: "other"}
		if c, err := s.CreateFirstReview(t.Context(), &r); err != nil || c || r.ID != f.review.ID || r.HeadSHA != "h1" {
			t.Errorf("on a reviewed PR: created %v, %+v, %v; want review %d", c, r, err, f.review.ID)
		}
		missing := chat.Review{Repository: "octo/none", PR: 1}
		if _, err := s.CreateFirstReview(t.Context(), &missing); chat.ErrorCode(err) != chat.CodeRepositoryNotFound {
			t.Errorf("unknown repository: %v", err)
		}
	})
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		const missing = "00000000-0000-0000-0000-000000000000"
		tests := []struct {
			name string
			call func() error
			want chat.Code
		}{
			{"Repository", func() error { _, err := s.Repository(ctx, "no/such"); return err }, chat.CodeRepositoryNotFound},
			{"Review of unknown repository", func() error { _, err := s.Review(ctx, "no/such", 7, 0); return err }, chat.CodeRepositoryNotFound},
			{"Reviews of unknown repository", func() error { _, err := s.Reviews(ctx, "no/such", 7); return err }, chat.CodeRepositoryNotFound},
			{"Conversations of unknown repository", func() error { _, err := s.Conversations(ctx, "no/such", 7); return err }, chat.CodeRepositoryNotFound},
			{"CreateReview in unknown repository", func() error { return s.CreateReview(ctx, &chat.Review{Repository: "no/such", PR: 1}) }, chat.CodeRepositoryNotFound},
			{"CreateReview in unknown repository id", func() error { return s.CreateReview(ctx, &chat.Review{RepositoryID: 9999, PR: 1}) }, chat.CodeRepositoryNotFound},
			{"latest Review of a PR without any", func() error { _, err := s.Review(ctx, f.repo.Name, 99, 0); return err }, chat.CodeNoReview},
			{"missing Review version", func() error { _, err := s.Review(ctx, f.repo.Name, 7, 5); return err }, chat.CodeNoReview},
			{"ReviewByID", func() error { _, err := s.ReviewByID(ctx, 9999); return err }, chat.CodeNoReview},
			{"CreateConversation on missing review", func() error {
				return s.CreateConversation(ctx, &chat.Conversation{ReviewID: 9999}, &chat.Turn{Question: "q"})
			}, chat.CodeNoReview},
			{"Conversation", func() error { _, err := s.Conversation(ctx, missing); return err }, chat.CodeNotFound},
			{"DeleteConversation", func() error { return s.DeleteConversation(ctx, missing) }, chat.CodeNotFound},
			{"AddTurn", func() error { return s.AddTurn(ctx, &chat.Turn{ConversationID: missing, Question: "q"}) }, chat.CodeNotFound},
			{"Turn", func() error { _, err := s.Turn(ctx, missing, 1); return err }, chat.CodeNotFound},
			{"TurnByID", func() error { _, err := s.TurnByID(ctx, missing); return err }, chat.CodeNotFound},
			{"TurnByID not a uuid", func() error { _, err := s.TurnByID(ctx, "nope"); return err }, chat.CodeNotFound},
			{"SetTurnQueue", func() error { return s.SetTurnQueue(ctx, missing, "host:w1") }, chat.CodeNotFound},
			{"ClaimTurn", func() error { _, err := s.ClaimTurn(ctx, missing, "w1/1", nil); return err }, chat.CodeNotFound},
			{"AppendEvents", func() error { return s.AppendEvents(ctx, missing, 1, []chat.Event{textEvent(1, "x")}) }, chat.CodeNotFound},
			{"AppendEvents without events", func() error { return s.AppendEvents(ctx, missing, 1, nil) }, chat.CodeNotFound},
			{"FinishTurn", func() error {
				return s.FinishTurn(ctx, missing, 1, chat.Outcome{State: chat.StateSucceeded})
			}, chat.CodeNotFound},
			{"SettleTurn", func() error {
				_, err := s.SettleTurn(ctx, missing, chat.StateCancelled, chat.ReasonCancelled, "", nil)
				return err
			}, chat.CodeNotFound},
			{"Events", func() error { _, err := s.Events(ctx, missing, 0); return err }, chat.CodeNotFound},
		}
		for _, tt := range tests {
			if got := chat.ErrorCode(tt.call()); got != tt.want {
				t.Errorf("%s: code %q, want %q", tt.name, got, tt.want)
			}
		}
	})
}

func TestConversations(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		c, first := f.converse(t)
		if c.ID == "" || c.CreatedAt.IsZero() || !c.UpdatedAt.Equal(c.CreatedAt) {
			t.Fatalf("conversation not filled in: %+v", c)
		}
		if c.Repository != f.repo.Name || c.PR != 7 || c.ReviewVersion != 1 {
			t.Fatalf("conversation is about %s#%d v%d, want %s#7 v1", c.Repository, c.PR, c.ReviewVersion, f.repo.Name)
		}
		if first.ID == "" || first.ConversationID != c.ID || first.Number != 1 || first.State != chat.StateQueued || first.CreatedAt.IsZero() {
			t.Fatalf("first turn not filled in: %+v", first)
		}

		got, err := s.Conversation(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := c
		want.Turns = []chat.Turn{first}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Conversation (-want +got):\n%s", diff)
		}
		byNumber, err := s.Turn(ctx, c.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(first, byNumber); diff != "" {
			t.Errorf("Turn (-want +got):\n%s", diff)
		}

		// A second conversation, on a second review version of the same PR,
		// and one on another PR.
		v2 := chat.Review{RepositoryID: f.repo.ID, PR: 7}
		if err := s.CreateReview(ctx, &v2); err != nil {
			t.Fatal(err)
		}
		c2 := chat.Conversation{ReviewID: v2.ID, Title: "later", CreatedAt: c.CreatedAt.Add(time.Second)}
		if err := s.CreateConversation(ctx, &c2, &chat.Turn{Question: "and now?"}); err != nil {
			t.Fatal(err)
		}
		other := chat.Review{RepositoryID: f.repo.ID, PR: 8}
		if err := s.CreateReview(ctx, &other); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateConversation(ctx, &chat.Conversation{ReviewID: other.ID}, &chat.Turn{Question: "q"}); err != nil {
			t.Fatal(err)
		}

		list, err := s.Conversations(ctx, f.repo.Name, 7)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]chat.Conversation{c2, c}, list); diff != "" {
			t.Errorf("Conversations, newest first (-want +got):\n%s", diff)
		}
		none, err := s.Conversations(ctx, f.repo.Name, 99)
		if err != nil || len(none) != 0 {
			t.Errorf("Conversations of a PR without any: %v, %v; want none", none, err)
		}
	})
}

func TestTurnsInOrderAndUpdatedAt(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		c, first := f.converse(t)
		want := []chat.Turn{first}
		last := first
		for i := 2; i <= 4; i++ {
			if _, err := s.SettleTurn(ctx, last.ID, chat.StateCancelled, chat.ReasonCancelled, "", nil); err != nil {
				t.Fatal(err)
			}
			next := chat.Turn{ConversationID: c.ID, Question: fmt.Sprint("question ", i), Provider: chat.BackendOpenAI}
			if err := s.AddTurn(ctx, &next); err != nil {
				t.Fatal(err)
			}
			if next.Number != i || next.State != chat.StateQueued || next.ID == "" {
				t.Fatalf("turn %d not filled in: %+v", i, next)
			}
			settledLast, err := s.TurnByID(ctx, last.ID)
			if err != nil {
				t.Fatal(err)
			}
			want[len(want)-1] = settledLast
			want = append(want, next)
			last = next
		}
		got, err := s.Conversation(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got.Turns); diff != "" {
			t.Errorf("turns (-want +got):\n%s", diff)
		}
		if !got.UpdatedAt.Equal(last.CreatedAt) {
			t.Errorf("updated at %v, want the last turn's creation %v", got.UpdatedAt, last.CreatedAt)
		}
	})
}

func TestBusyRule(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		c, first := f.converse(t)

		err := s.AddTurn(ctx, &chat.Turn{ConversationID: c.ID, Question: "another"})
		wantCode(t, err, chat.CodeBusy)

		f.claim(t, first.ID, "w1/1")
		err = s.AddTurn(ctx, &chat.Turn{ConversationID: c.ID, Question: "another"})
		wantCode(t, err, chat.CodeBusy)

		if _, err := s.SettleTurn(ctx, first.ID, chat.StateFailed, chat.ReasonTimeout, "", nil); err != nil {
			t.Fatal(err)
		}
		second := chat.Turn{ConversationID: c.ID, Question: "another"}
		if err := s.AddTurn(ctx, &second); err != nil {
			t.Fatalf("AddTurn once the first turn settled: %v", err)
		}
		if second.Number != 2 {
			t.Errorf("second turn has number %d, want 2", second.Number)
		}

		// Another conversation is not busy because of this one.
		_, other := f.converse(t)
		if other.State != chat.StateQueued {
			t.Errorf("other conversation's turn is %s", other.State)
		}
	})
}

func TestBusyRuleRace(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		c, first := f.converse(t)
		if _, err := s.SettleTurn(ctx, first.ID, chat.StateCancelled, chat.ReasonCancelled, "", nil); err != nil {
			t.Fatal(err)
		}
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				errs[i] = s.AddTurn(ctx, &chat.Turn{ConversationID: c.ID, Question: fmt.Sprint("racer ", i)})
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch chat.ErrorCode(err) {
			case "":
				won++
			case chat.CodeBusy:
			default:
				t.Errorf("AddTurn: %v, want success or busy", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d AddTurns won, want exactly 1", won)
		}
		got, err := s.Conversation(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Turns) != 2 || got.Turns[1].Number != 2 || got.Turns[1].State != chat.StateQueued {
			t.Errorf("turns after the race: %+v", got.Turns)
		}
	})
}

func TestClaimTurnFencing(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		_, turn := f.converse(t)

		run1 := f.claim(t, turn.ID, "w1/1")
		if run1.State != chat.StateRunning || run1.Fence != 1 || run1.Runner != "w1/1" || run1.StartedAt == nil {
			t.Fatalf("first claim: %+v", run1)
		}
		if err := s.AppendEvents(ctx, turn.ID, run1.Fence, []chat.Event{textEvent(1, "a"), textEvent(2, "b")}); err != nil {
			t.Fatal(err)
		}

		var asked chat.Turn
		run2, err := s.ClaimTurn(ctx, turn.ID, "w2/1", func(t chat.Turn) bool { asked = t; return true })
		if err != nil {
			t.Fatal(err)
		}
		if asked.Runner != "w1/1" || asked.Fence != 1 {
			t.Errorf("allow was asked with runner %q fence %d, want w1/1 and 1", asked.Runner, asked.Fence)
		}
		if run2.Fence != run1.Fence+1 || run2.Runner != "w2/1" || run2.LastSeq != 2 {
			t.Errorf("second claim: fence %d runner %q last seq %d, want %d w2/1 2", run2.Fence, run2.Runner, run2.LastSeq, run1.Fence+1)
		}
		if !run2.StartedAt.Equal(*run1.StartedAt) {
			t.Errorf("second claim moved started_at from %v to %v", run1.StartedAt, run2.StartedAt)
		}

		// The stale run can store nothing.
		wantIs(t, s.AppendEvents(ctx, turn.ID, run1.Fence, []chat.Event{textEvent(3, "stale")}), chat.ErrFenced)
		wantIs(t, s.AppendEvents(ctx, turn.ID, run1.Fence, nil), chat.ErrFenced)
		wantIs(t, s.FinishTurn(ctx, turn.ID, run1.Fence, chat.Outcome{State: chat.StateSucceeded}), chat.ErrFenced)
		before, err := s.Conversation(ctx, turn.ConversationID)
		if err != nil {
			t.Fatal(err)
		}
		stale := chat.Outcome{
			State:        chat.StateSucceeded,
			Events:       []chat.Event{textEvent(3, "stale"), {Seq: 4, Type: chat.EventDone}},
			Conversation: &chat.SessionInfo{SessionID: "stale-session", SessionHost: "w1"},
		}
		wantIs(t, s.FinishTurn(ctx, turn.ID, run1.Fence, stale), chat.ErrFenced)
		after, err := s.Conversation(ctx, turn.ConversationID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("a fenced finish changed the conversation (-before +after):\n%s", diff)
		}
		if evs, err := s.Events(ctx, turn.ID, 2); err != nil || len(evs) != 0 {
			t.Errorf("a fenced finish stored events %v, %v", evs, err)
		}

		// allow may refuse a takeover.
		_, err = s.ClaimTurn(ctx, turn.ID, "w3/1", func(chat.Turn) bool { return false })
		wantIs(t, err, chat.ErrFenced)
		still, err := s.TurnByID(ctx, turn.ID)
		if err != nil {
			t.Fatal(err)
		}
		if still.Fence != run2.Fence || still.Runner != "w2/1" {
			t.Errorf("a refused claim changed the turn: fence %d runner %q", still.Fence, still.Runner)
		}

		if err := s.FinishTurn(ctx, turn.ID, run2.Fence, chat.Outcome{State: chat.StateSucceeded}); err != nil {
			t.Fatal(err)
		}
		_, err = s.ClaimTurn(ctx, turn.ID, "w1/1", func(chat.Turn) bool {
			t.Error("allow asked about a settled turn")
			return true
		})
		wantIs(t, err, chat.ErrSettled)
		wantIs(t, s.FinishTurn(ctx, turn.ID, run2.Fence, chat.Outcome{State: chat.StateFailed}), chat.ErrFenced)
	})
}

// TestClaimTurnWithConversation: the claim returns the conversation's head
// as ConversationHead reads it, and takes the fence as ClaimTurn does, also
// in a takeover; a settled turn is refused without a conversation.
func TestClaimTurnWithConversation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		c, turn := f.converse(t)
		// The conversation carries a session, as after an earlier turn.
		first := f.claim(t, turn.ID, "w0/1")
		if err := s.FinishTurn(ctx, turn.ID, first.Fence, chat.Outcome{State: chat.StateSucceeded,
			Conversation: &chat.SessionInfo{SessionID: "sess-1", SessionHost: "w0", RunDir: "/runs/c1", Backend: chat.BackendClaudeCode, Model: "opus", Session: chat.SessionForked}}); err != nil {
			t.Fatal(err)
		}
		next := chat.Turn{ConversationID: c.ID, Question: "And then?"}
		if err := s.AddTurn(ctx, &next); err != nil {
			t.Fatal(err)
		}
		want, err := s.ConversationHead(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want.SessionID != "sess-1" || want.Repository != f.repo.Name || want.PR != 7 {
			t.Fatalf("conversation head %+v lacks the session or the review's place", want)
		}

		run1, conv, err := s.ClaimTurnWithConversation(ctx, next.ID, "w1/1", nil)
		if err != nil {
			t.Fatal(err)
		}
		if run1.State != chat.StateRunning || run1.Fence != 1 || run1.Runner != "w1/1" || run1.ConversationID != c.ID {
			t.Errorf("claim: %+v", run1)
		}
		// The claim returns the turn as stored, every field read back.
		if stored, err := s.TurnByID(ctx, next.ID); err != nil {
			t.Fatal(err)
		} else if diff := cmp.Diff(stored, run1); diff != "" {
			t.Errorf("turn with the claim (-TurnByID +claim):\n%s", diff)
		}
		if diff := cmp.Diff(want, conv); diff != "" {
			t.Errorf("conversation with the claim (-ConversationHead +claim):\n%s", diff)
		}

		// A takeover asks allow and returns the conversation too.
		run2, conv, err := s.ClaimTurnWithConversation(ctx, next.ID, "w2/1", func(t chat.Turn) bool { return t.Runner == "w1/1" })
		if err != nil {
			t.Fatal(err)
		}
		if run2.Fence != run1.Fence+1 || run2.Runner != "w2/1" {
			t.Errorf("takeover: fence %d runner %q, want %d w2/1", run2.Fence, run2.Runner, run1.Fence+1)
		}
		if diff := cmp.Diff(want, conv); diff != "" {
			t.Errorf("conversation with the takeover (-ConversationHead +claim):\n%s", diff)
		}
		wantIs(t, s.AppendEvents(ctx, next.ID, run1.Fence, nil), chat.ErrFenced)

		if err := s.FinishTurn(ctx, next.ID, run2.Fence, chat.Outcome{State: chat.StateSucceeded}); err != nil {
			t.Fatal(err)
		}
		_, conv, err = s.ClaimTurnWithConversation(ctx, next.ID, "w3/1", nil)
		wantIs(t, err, chat.ErrSettled)
		if conv.ID != "" {
			t.Errorf("a refused claim returned conversation %+v", conv)
		}
		_, _, err = s.ClaimTurnWithConversation(ctx, "00000000-0000-0000-0000-000000000000", "w3/1", nil)
		wantCode(t, err, chat.CodeNotFound)
	})
}

// TestReleaseTurn: a released turn is queued with no runner, the next claim
// takes it without asking and fences the released run off; a run that no
// longer holds the turn cannot release it.
func TestReleaseTurn(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		_, turn := f.converse(t)
		run1 := f.claim(t, turn.ID, "w1/1")
		rel, err := s.ReleaseTurn(ctx, turn.ID, run1.Fence)
		if err != nil {
			t.Fatal(err)
		}
		if rel.State != chat.StateQueued || rel.Runner != "" || rel.Fence != run1.Fence {
			t.Fatalf("released: %+v", rel)
		}
		wantIs(t, second(s.ReleaseTurn(ctx, turn.ID, run1.Fence)), chat.ErrFenced) // not running
		run2, err := s.ClaimTurn(ctx, turn.ID, "w2/1", func(chat.Turn) bool { t.Error("a released turn's claim asked"); return false })
		if err != nil {
			t.Fatal(err)
		}
		if run2.Fence != run1.Fence+1 || run2.Runner != "w2/1" {
			t.Fatalf("claim after release: %+v", run2)
		}
		wantIs(t, s.FinishTurn(ctx, turn.ID, run1.Fence, chat.Outcome{State: chat.StateSucceeded}), chat.ErrFenced)
		wantIs(t, second(s.ReleaseTurn(ctx, turn.ID, run1.Fence)), chat.ErrFenced)
	})
}

func second[T any](_ T, err error) error { return err }

func TestClaimTurnConcurrently(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := setup(t, s)
		_, turn := f.converse(t)
		const n = 8
		fences := make([]int64, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				// Half decide on the turn as read (and must retry when the
				// fence moved under them), half claim unconditionally.
				var allow func(chat.Turn) bool
				if i%2 == 0 {
					allow = func(chat.Turn) bool { return true }
				}
				got, err := s.ClaimTurn(t.Context(), turn.ID, fmt.Sprintf("w%d/1", i), allow)
				if err != nil {
					t.Error(err)
				}
				fences[i] = got.Fence
			})
		}
		wg.Wait()
		slices.Sort(fences)
		if diff := cmp.Diff([]int64{1, 2, 3, 4, 5, 6, 7, 8}, fences); diff != "" {
			t.Errorf("fences of concurrent claims (-want +got):\n%s", diff)
		}
	})
}

func TestFinishTurn(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		c, turn := f.converse(t)

		// Only a running turn can be finished.
		wantIs(t, s.FinishTurn(ctx, turn.ID, 0, chat.Outcome{State: chat.StateSucceeded}), chat.ErrFenced)

		run := f.claim(t, turn.ID, "w1/1")
		if err := s.AppendEvents(ctx, turn.ID, run.Fence, []chat.Event{textEvent(1, "thinking")}); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishTurn(ctx, turn.ID, run.Fence, chat.Outcome{State: chat.StateRunning}); err == nil {
			t.Fatal("FinishTurn with a state that is not final succeeded")
		}
		cost := 0.25
		answer := &chat.Answer{
			AnswerMarkdown: "Because of the lock.",
			Citations:      []chat.Citation{{Path: "a.go", StartLine: 3, EndLine: 9}},
			SuggestsFix:    &chat.Fix{Summary: "take the lock"},
		}
		done := chat.Event{Seq: 2, Type: chat.EventDone, ConversationID: c.ID, Turn: 1, Answer: answer, At: time.Date(2025, 1, 2, 3, 4, 6, 0, time.UTC)}
		o := chat.Outcome{
			State:   chat.StateSucceeded,
			Answer:  answer,
			Note:    "Started without the review's own context: session gone",
			Usage:   chat.Usage{InputTokens: 100, OutputTokens: 20, Calls: 2, Repairs: 1, CostUSD: &cost},
			Backend: chat.BackendOpenAI, Model: "gpt", Session: chat.SessionSeeded,
			Conversation: &chat.SessionInfo{
				SessionID: "conv-session", SessionHost: "w1", RunDir: "/runs/c1",
				Backend: chat.BackendOpenAI, Model: "gpt", Session: chat.SessionSeeded, SeededReason: "session gone",
			},
			Events: []chat.Event{done},
		}
		if err := s.FinishTurn(ctx, turn.ID, run.Fence, o); err != nil {
			t.Fatal(err)
		}

		got, err := s.Conversation(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		fin := got.Turns[0]
		if fin.FinishedAt == nil || fin.FinishedAt.Before(*run.StartedAt) {
			t.Fatalf("finished at %v, started at %v", fin.FinishedAt, run.StartedAt)
		}
		want := run
		want.State, want.Answer, want.Note, want.Usage = o.State, answer, o.Note, o.Usage
		want.Backend, want.Model, want.Session = o.Backend, o.Model, o.Session
		want.FinishedAt, want.LastSeq = fin.FinishedAt, 2
		if diff := cmp.Diff(want, fin); diff != "" {
			t.Errorf("finished turn (-want +got):\n%s", diff)
		}
		wantConv := c
		wantConv.SessionID, wantConv.SessionHost, wantConv.RunDir = "conv-session", "w1", "/runs/c1"
		wantConv.Backend, wantConv.Model, wantConv.Session, wantConv.SeededReason = chat.BackendOpenAI, "gpt", chat.SessionSeeded, "session gone"
		wantConv.UpdatedAt = *fin.FinishedAt
		wantConv.Turns = got.Turns
		if diff := cmp.Diff(wantConv, got); diff != "" {
			t.Errorf("conversation after finish (-want +got):\n%s", diff)
		}

		events, err := s.Events(ctx, turn.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]chat.Event{textEvent(1, "thinking"), done}, events); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}

		// Finished means settled.
		_, err = s.SettleTurn(ctx, turn.ID, chat.StateCancelled, chat.ReasonCancelled, "", nil)
		wantIs(t, err, chat.ErrSettled)
		pending, err := s.PendingTurns(ctx)
		if err != nil || len(pending) != 0 {
			t.Errorf("pending turns after finish: %v, %v", pending, err)
		}
	})
}

func TestFinishTurnKeepsConversationSessionWithoutInfo(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		c, turn := f.converse(t)
		run := f.claim(t, turn.ID, "w1/1")
		o := chat.Outcome{State: chat.StateFailed, Reason: chat.ReasonBackendError, Usage: chat.Usage{CostReason: "no price for model"}}
		if err := s.FinishTurn(ctx, turn.ID, run.Fence, o); err != nil {
			t.Fatal(err)
		}
		got, err := s.Conversation(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		fin := got.Turns[0]
		if fin.State != chat.StateFailed || fin.Reason != chat.ReasonBackendError || fin.Answer != nil ||
			fin.Usage.CostUSD != nil || fin.Usage.CostReason != "no price for model" {
			t.Errorf("failed turn: %+v", fin)
		}
		want := c
		want.UpdatedAt = *fin.FinishedAt
		want.Turns = got.Turns
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("conversation (-want +got):\n%s", diff)
		}
	})
}

func TestSettleTurn(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		c, turn := f.converse(t)
		run := f.claim(t, turn.ID, "w1/1")

		if _, err := s.SettleTurn(ctx, turn.ID, chat.StateQueued, "", "", nil); err == nil {
			t.Fatal("SettleTurn to queued succeeded")
		}
		settled, err := s.SettleTurn(ctx, turn.ID, chat.StateInterrupted, chat.ReasonInterrupted, "The worker stopped.", nil)
		if err != nil {
			t.Fatal(err)
		}
		if settled.State != chat.StateInterrupted || settled.Reason != chat.ReasonInterrupted ||
			settled.Note != "The worker stopped." || settled.Fence != run.Fence+1 || settled.FinishedAt == nil {
			t.Fatalf("settled turn: %+v", settled)
		}
		got, err := s.TurnByID(ctx, turn.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(settled, got); diff != "" {
			t.Errorf("stored turn (-returned +stored):\n%s", diff)
		}
		conv, err := s.Conversation(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !conv.UpdatedAt.Equal(*settled.FinishedAt) {
			t.Errorf("conversation updated at %v, want %v", conv.UpdatedAt, settled.FinishedAt)
		}

		// The run it was taken from is fenced off.
		wantIs(t, s.AppendEvents(ctx, turn.ID, run.Fence, []chat.Event{textEvent(1, "late")}), chat.ErrFenced)
		wantIs(t, s.FinishTurn(ctx, turn.ID, run.Fence, chat.Outcome{State: chat.StateSucceeded}), chat.ErrFenced)
		_, err = s.ClaimTurn(ctx, turn.ID, "w1/2", nil)
		wantIs(t, err, chat.ErrSettled)
		_, err = s.SettleTurn(ctx, turn.ID, chat.StateCancelled, chat.ReasonCancelled, "", nil)
		wantIs(t, err, chat.ErrSettled)
	})
}

// TestSettleTurnStoresItsFinalEvents: the events given to SettleTurn are
// numbered after the run's stored ones and stored with the settle; a
// reader that sees the turn settled, read by read while it settles, sees
// them too.
func TestSettleTurnStoresItsFinalEvents(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		_, turn := f.converse(t)
		run := f.claim(t, turn.ID, "w1/1")
		if err := s.AppendEvents(ctx, turn.ID, run.Fence, []chat.Event{textEvent(1, "a"), textEvent(2, "b")}); err != nil {
			t.Fatal(err)
		}

		// A reader that checks, over and over, that a settled turn has its
		// final event as its last stored one.
		stop := make(chan struct{})
		checked := make(chan error, 1)
		var sawSettled atomic.Bool
		go func() {
			for {
				select {
				case <-stop:
					checked <- nil
					return
				default:
				}
				got, err := s.TurnByID(ctx, turn.ID)
				if err != nil {
					checked <- err
					return
				}
				if !got.State.Final() {
					continue
				}
				evs, err := s.Events(ctx, turn.ID, 0)
				if err != nil {
					checked <- err
					return
				}
				if n := len(evs); n == 0 || !evs[n-1].Final() || evs[n-1].Seq != got.LastSeq {
					checked <- fmt.Errorf("turn settled (last seq %d) with events %+v", got.LastSeq, evs)
					return
				}
				sawSettled.Store(true)
			}
		}()
		at := time.Date(2025, 1, 2, 3, 4, 6, 0, time.UTC)
		final := []chat.Event{
			{Type: chat.EventState, State: chat.StateCancelled, At: at},
			{Type: chat.EventError, Message: "Cancelled.", Reason: chat.ReasonCancelled, At: at},
		}
		settled, err := s.SettleTurn(ctx, turn.ID, chat.StateCancelled, chat.ReasonCancelled, "Cancelled.", final)
		if err != nil {
			t.Fatal(err)
		}
		chattest.Eventually(t, "the reader to check the settled turn", func() bool { return sawSettled.Load() || len(checked) > 0 })
		close(stop)
		if err := chattest.Receive(t, "the reader's verdict", checked); err != nil {
			t.Fatal(err)
		}
		if settled.LastSeq != 4 {
			t.Errorf("settled turn's last seq %d, want 4", settled.LastSeq)
		}
		evs, err := s.Events(ctx, turn.ID, 2)
		if err != nil {
			t.Fatal(err)
		}
		want := []chat.Event{final[0], final[1]}
		want[0].Seq, want[1].Seq = 3, 4
		if diff := cmp.Diff(want, evs); diff != "" {
			t.Errorf("final events (-want +stored):\n%s", diff)
		}
		// A settle that finds the turn final stores nothing.
		_, err = s.SettleTurn(ctx, turn.ID, chat.StateFailed, chat.ReasonTimeout, "", final)
		wantIs(t, err, chat.ErrSettled)
		if evs, err := s.Events(ctx, turn.ID, 4); err != nil || len(evs) != 0 {
			t.Errorf("a refused settle stored %v, %v", evs, err)
		}
	})
}

func TestSettleTurnAddsToNote(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		_, turn := f.converse(t)
		if err := s.DB().WithContext(ctx).Exec(`UPDATE turns SET note = ? WHERE id = ?`, "Seeded.", turn.ID).Error; err != nil {
			t.Fatal(err)
		}
		settled, err := s.SettleTurn(ctx, turn.ID, chat.StateCancelled, chat.ReasonCancelled, "Cancelled by the user.", nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := "Seeded.\nCancelled by the user."; settled.Note != want {
			t.Errorf("note %q, want %q", settled.Note, want)
		}
		if settled.Fence != 1 {
			t.Errorf("settling a queued turn left fence %d, want 1", settled.Fence)
		}
	})
}

// TestAppendEventsAnySize: an append of a few events (one statement on
// Postgres) and one of many (a transaction) store every event once and
// move LastSeq; with a stale fence neither stores anything.
func TestAppendEventsAnySize(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		_, turn := f.converse(t)
		run1 := f.claim(t, turn.ID, "w1/1")
		var want []chat.Event
		for _, n := range []int{1, 3, 250} {
			var evs []chat.Event
			for range n {
				evs = append(evs, textEvent(int64(len(want)+len(evs)+1), "x"))
			}
			if err := s.AppendEvents(ctx, turn.ID, run1.Fence, evs); err != nil {
				t.Fatalf("append %d events: %v", n, err)
			}
			want = append(want, evs...)
		}
		run2, err := s.ClaimTurn(ctx, turn.ID, "w2/1", func(chat.Turn) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 250} {
			var evs []chat.Event
			for i := range n {
				evs = append(evs, textEvent(int64(len(want)+i+1), "stale"))
			}
			wantIs(t, s.AppendEvents(ctx, turn.ID, run1.Fence, evs), chat.ErrFenced)
		}
		got, err := s.Events(ctx, turn.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		after, err := s.TurnByID(ctx, turn.ID)
		if err != nil {
			t.Fatal(err)
		}
		if after.LastSeq != int64(len(want)) || after.Fence != run2.Fence {
			t.Errorf("turn has last seq %d and fence %d, want %d and %d", after.LastSeq, after.Fence, len(want), run2.Fence)
		}
	})
}

func TestEvents(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		_, turn := f.converse(t)
		run := f.claim(t, turn.ID, "w1/1")

		in, out, cost := int64(10), int64(3), 0.01
		all := []chat.Event{
			{Seq: 1, Type: chat.EventState, State: chat.StateRunning, At: time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)},
			{Seq: 2, Type: chat.EventToolStart, ToolID: "t1", ToolName: "read_file", Input: []byte(`{"path":"a.go"}`)},
			{Seq: 3, Type: chat.EventToolResult, ToolID: "t1", ToolName: "read_file", Summary: "40 lines"},
			{Seq: 4, Type: chat.EventUsage, InputTokens: &in, OutputTokens: &out, CostUSD: &cost},
			{Seq: 5, Type: chat.EventNote, Text: "note"},
		}
		if err := s.AppendEvents(ctx, turn.ID, run.Fence, all[:3]); err != nil {
			t.Fatal(err)
		}
		// A retried append stores nothing twice.
		if err := s.AppendEvents(ctx, turn.ID, run.Fence, all[2:]); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvents(ctx, turn.ID, run.Fence, nil); err != nil {
			t.Fatalf("AppendEvents with no events and the current fence: %v", err)
		}
		if err := s.AppendEvents(ctx, turn.ID, run.Fence, []chat.Event{{Type: chat.EventNote}}); err == nil {
			t.Error("AppendEvents of an event without a seq succeeded")
		}

		for _, after := range []int64{0, 2, 5, 9} {
			got, err := s.Events(ctx, turn.ID, after)
			if err != nil {
				t.Fatal(err)
			}
			want := all[min(after, int64(len(all))):]
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events after %d (-want +got):\n%s", after, diff)
			}
		}
		got, err := s.TurnByID(ctx, turn.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.LastSeq != 5 {
			t.Errorf("last seq %d, want 5", got.LastSeq)
		}
		// Appending older events does not move LastSeq back.
		if err := s.AppendEvents(ctx, turn.ID, run.Fence, []chat.Event{textEvent(1, "again")}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.TurnByID(ctx, turn.ID); got.LastSeq != 5 {
			t.Errorf("last seq %d after an old event, want 5", got.LastSeq)
		}
	})
}

func TestManyEventsInOneAppend(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		_, turn := f.converse(t)
		run := f.claim(t, turn.ID, "w1/1")
		events := make([]chat.Event, 2500)
		for i := range events {
			events[i] = textEvent(int64(i+1), "x")
		}
		if err := s.AppendEvents(ctx, turn.ID, run.Fence, events); err != nil {
			t.Fatal(err)
		}
		got, err := s.Events(ctx, turn.ID, 2400)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 100 || got[0].Seq != 2401 {
			t.Errorf("got %d events from seq %d, want 100 from 2401", len(got), got[0].Seq)
		}
	})
}

func TestDeleteConversationCascades(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		c, turn := f.converse(t)
		keep, kept := f.converse(t)
		run := f.claim(t, turn.ID, "w1/1")
		if err := s.AppendEvents(ctx, turn.ID, run.Fence, []chat.Event{textEvent(1, "a")}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteConversation(ctx, c.ID); err != nil {
			t.Fatal(err)
		}
		_, err := s.Conversation(ctx, c.ID)
		wantCode(t, err, chat.CodeNotFound)
		_, err = s.TurnByID(ctx, turn.ID)
		wantCode(t, err, chat.CodeNotFound)
		wantCode(t, s.FinishTurn(ctx, turn.ID, run.Fence, chat.Outcome{State: chat.StateSucceeded}), chat.CodeNotFound)
		if rows := eventRows(t, s, turn.ID); rows != 0 {
			t.Errorf("%d events left of the deleted conversation", rows)
		}
		if _, err := s.TurnByID(ctx, kept.ID); err != nil {
			t.Errorf("the other conversation %s lost its turn: %v", keep.ID, err)
		}
		wantCode(t, s.DeleteConversation(ctx, c.ID), chat.CodeNotFound)
	})
}

// TestDeletedReviewTakesItsTurnsEvents checks that a turn's events go
// with it when the turn goes by a cascade from its review (on Postgres by
// the trigger of migration 00011, not a foreign key).
func TestDeletedReviewTakesItsTurnsEvents(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		_, turn := f.converse(t)
		run := f.claim(t, turn.ID, "w1/1")
		if err := s.FinishTurn(ctx, turn.ID, run.Fence, chat.Outcome{State: chat.StateSucceeded,
			Events: []chat.Event{textEvent(1, "a"), textEvent(2, "b")}}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Events(ctx, turn.ID, 0); err != nil || len(got) != 2 {
			t.Fatalf("events before the delete: %d, %v; want 2", len(got), err)
		}
		if err := s.DB().WithContext(ctx).Exec(`DELETE FROM reviews WHERE id = ?`, f.review.ID).Error; err != nil {
			t.Fatal(err)
		}
		if n := eventRows(t, s, turn.ID); n != 0 {
			t.Errorf("%d events left of a turn whose review was deleted", n)
		}
	})
}

// TestFinishesBesideDeletesLeaveNoEvents runs finishes and event appends
// of turns beside the deletes of their conversations: whichever goes
// first, no event is left without its turn, and a run that lost its turn
// hears that it is gone.
func TestFinishesBesideDeletesLeaveNoEvents(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		const n = 40
		type pair struct {
			conv chat.Conversation
			run  chat.Turn
		}
		pairs := make([]pair, n)
		for i := range pairs {
			c, turn := f.converse(t)
			pairs[i] = pair{c, f.claim(t, turn.ID, "w1/1")}
		}
		var wg sync.WaitGroup
		errs := make(chan error, 3*n)
		for _, p := range pairs {
			wg.Add(2)
			go func() {
				defer wg.Done()
				err := s.AppendEvents(ctx, p.run.ID, p.run.Fence, []chat.Event{textEvent(1, "a"), textEvent(2, "b")})
				if err == nil {
					err = s.FinishTurn(ctx, p.run.ID, p.run.Fence, chat.Outcome{State: chat.StateSucceeded,
						Events: []chat.Event{textEvent(3, "c"), textEvent(4, "d")}})
				}
				if err != nil && chat.ErrorCode(err) != chat.CodeNotFound {
					errs <- fmt.Errorf("run of %s: %w", p.run.ID, err)
				}
			}()
			go func() {
				defer wg.Done()
				if err := s.DeleteConversation(ctx, p.conv.ID); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		var orphans int64
		if err := s.DB().WithContext(ctx).Raw(`SELECT COUNT(*) FROM turn_events e
WHERE NOT EXISTS (SELECT 1 FROM turns t WHERE t.id = e.turn_id)`).Scan(&orphans).Error; err != nil {
			t.Fatal(err)
		}
		if orphans != 0 {
			t.Errorf("%d events left without their turn", orphans)
		}
	})
}

// eventRows counts the stored event rows of turn id.
func eventRows(t *testing.T, s *store.Store, id string) int64 {
	t.Helper()
	var rows int64
	if err := s.DB().WithContext(t.Context()).Raw(`SELECT COUNT(*) FROM turn_events WHERE turn_id = ?`, id).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestPendingTurnsAndQueue(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		var turns []chat.Turn
		for i := range 4 {
			c := chat.Conversation{ReviewID: f.review.ID}
			// Created in the reverse of insertion order.
			turn := chat.Turn{Question: "q", Focus: &chat.Focus{Kind: chat.FocusOverview},
				CreatedAt: base.Add(time.Duration(10-i) * time.Minute)}
			if err := s.CreateConversation(ctx, &c, &turn); err != nil {
				t.Fatal(err)
			}
			turns = append(turns, turn)
		}
		if err := s.SetTurnQueue(ctx, turns[0].ID, "host:w1"); err != nil {
			t.Fatal(err)
		}
		running := f.claim(t, turns[1].ID, "w1/1")
		if _, err := s.SettleTurn(ctx, turns[2].ID, chat.StateCancelled, chat.ReasonCancelled, "", nil); err != nil {
			t.Fatal(err)
		}
		queued0, err := s.TurnByID(ctx, turns[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if queued0.Queue != "host:w1" {
			t.Errorf("queue %q, want host:w1", queued0.Queue)
		}
		got, err := s.PendingTurns(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Each as a reconciler pass needs it: no question or focus.
		var want []chat.Turn
		for _, turn := range []chat.Turn{turns[3], running, queued0} {
			if turn.Question == "" || turn.Focus == nil {
				t.Fatalf("turn %s has no question or focus to leave out", turn.ID)
			}
			turn.Question, turn.Focus = "", nil
			want = append(want, turn)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pending turns, oldest first (-want +got):\n%s", diff)
		}
	})
}

// TestConcurrentWriters drives whole turns through many goroutines at once:
// on SQLite none of them may fail with SQLITE_BUSY.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := setup(t, s)
		const writers, turnsEach = 16, 10
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				if err := runTurns(t.Context(), s, f.review.ID, fmt.Sprintf("w%d/1", w), turnsEach); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		var finished int64
		if err := s.DB().Raw(`SELECT COUNT(*) FROM turns WHERE state = 'succeeded'`).Scan(&finished).Error; err != nil {
			t.Fatal(err)
		}
		if finished != writers*turnsEach {
			t.Errorf("%d turns succeeded, want %d", finished, writers*turnsEach)
		}
	})
}

// TestSQLiteSharedByTwoStores has two stores, as two processes would, write
// to one SQLite file at once: they wait for each other's locks.
func TestSQLiteSharedByTwoStores(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "shared.db")
	var stores [2]*store.Store
	for i := range stores {
		s, err := store.Open(ctx, store.Config{SQLitePath: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	if err := stores[0].Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := stores[1].Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	f := setup(t, stores[0])
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			if err := runTurns(ctx, stores[w%2], f.review.ID, fmt.Sprintf("w%d/1", w), 10); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var finished int64
	if err := stores[1].DB().Raw(`SELECT COUNT(*) FROM turns WHERE state = 'succeeded'`).Scan(&finished).Error; err != nil {
		t.Fatal(err)
	}
	if finished != 80 {
		t.Errorf("%d turns succeeded, want 80", finished)
	}
}

// runTurns runs n turns of one conversation the way a worker does.
func runTurns(ctx context.Context, s *store.Store, reviewID int64, runner string, n int) error {
	c := chat.Conversation{ReviewID: reviewID}
	for i := range n {
		turn := chat.Turn{ConversationID: c.ID, Question: "q"}
		var err error
		if i == 0 {
			err = s.CreateConversation(ctx, &c, &turn)
		} else {
			err = s.AddTurn(ctx, &turn)
		}
		if err != nil {
			return err
		}
		if err := s.SetTurnQueue(ctx, turn.ID, ""); err != nil {
			return err
		}
		run, err := s.ClaimTurn(ctx, turn.ID, runner, nil)
		if err != nil {
			return err
		}
		if err := s.AppendEvents(ctx, turn.ID, run.Fence, []chat.Event{
			{Seq: 1, Type: chat.EventState, State: chat.StateRunning},
			{Seq: 2, Type: chat.EventTextDelta, Text: "hello"},
		}); err != nil {
			return err
		}
		if err := s.FinishTurn(ctx, turn.ID, run.Fence, chat.Outcome{
			State:  chat.StateSucceeded,
			Answer: &chat.Answer{AnswerMarkdown: "hi"},
			Events: []chat.Event{{Seq: 3, Type: chat.EventDone}},
		}); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkTurn measures a turn's writes from question to answer, many
// conversations at once.
func BenchmarkTurn(b *testing.B) {
	for _, db := range storetest.Databases() {
		b.Run(db.Name, func(b *testing.B) {
			s := db.New(b)
			ctx := b.Context()
			repo := chat.Repository{Name: "octo/bench"}
			if _, err := s.UpsertRepository(ctx, &repo); err != nil {
				b.Fatal(err)
			}
			review := chat.Review{RepositoryID: repo.ID, PR: 1}
			if err := s.CreateReview(ctx, &review); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(4)
			b.ResetTimer()
			var id sync.Mutex
			next := 0
			b.RunParallel(func(pb *testing.PB) {
				id.Lock()
				next++
				runner := fmt.Sprintf("w%d/1", next)
				id.Unlock()
				for pb.Next() {
					if err := runTurns(ctx, s, review.ID, runner, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
		})
	}
}

func TestProviderSettings(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		if p, m, err := s.ActiveProvider(ctx); err != nil || p != "" || m != "" {
			t.Fatalf("fresh active provider = %q %q %v", p, m, err)
		}
		if err := s.SetActiveProvider(ctx, "ollama", "llama3"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetActiveProvider(ctx, "openai", "gpt-x"); err != nil {
			t.Fatal(err)
		}
		if p, m, err := s.ActiveProvider(ctx); err != nil || p != "openai" || m != "gpt-x" {
			t.Fatalf("active provider = %q %q %v", p, m, err)
		}
		if err := s.SetProviderKey(ctx, "openai", []byte{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetProviderKey(ctx, "openai", []byte{4, 5}); err != nil {
			t.Fatal(err)
		}
		keys, err := s.ProviderKeys(ctx)
		if err != nil || len(keys) != 1 || string(keys["openai"]) != "\x04\x05" {
			t.Fatalf("keys = %v %v", keys, err)
		}
		if found, err := s.DeleteProviderKey(ctx, "openai"); err != nil || !found {
			t.Fatalf("delete = %v %v", found, err)
		}
		if found, err := s.DeleteProviderKey(ctx, "openai"); err != nil || found {
			t.Fatalf("second delete = %v %v", found, err)
		}
	})
}

func TestAgentSessions(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a, b := s.AgentSessions("openai"), s.AgentSessions("other")
		if _, err := a.Load(ctx, "s1"); !errors.Is(err, chat.ErrSessionGone) {
			t.Fatalf("load of a missing session: %v", err)
		}
		if err := a.Save(ctx, "s1", []byte(`[{"role":"user","content":"hi"}]`)); err != nil {
			t.Fatal(err)
		}
		if err := a.Save(ctx, "s1", []byte(`[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]`)); err != nil {
			t.Fatal(err)
		}
		got, err := a.Load(ctx, "s1")
		if err != nil || string(got) != `[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]` {
			t.Fatalf("load = %s %v", got, err)
		}
		if _, err := b.Load(ctx, "s1"); !errors.Is(err, chat.ErrSessionGone) {
			t.Fatalf("another backend's session was found: %v", err)
		}
	})
}

// TestCreateConversationsAtOnce: questions asked at the same time (which
// share transactions) each get their own conversation with turn 1, and one
// about a missing review fails alone.
func TestCreateConversationsAtOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		const n = 40
		convs := make([]chat.Conversation, n)
		turns := make([]chat.Turn, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			convs[i] = chat.Conversation{ReviewID: f.review.ID, Title: fmt.Sprint("q", i)}
			if i == 7 {
				convs[i].ReviewID = f.review.ID + 1000
			}
			turns[i] = chat.Turn{Question: fmt.Sprint("question ", i)}
			wg.Go(func() { errs[i] = s.CreateConversation(ctx, &convs[i], &turns[i]) })
		}
		wg.Wait()
		ids := map[string]bool{}
		for i := range n {
			if i == 7 {
				if chat.ErrorCode(errs[i]) != chat.CodeNoReview {
					t.Errorf("ask about a missing review: %v, want %s", errs[i], chat.CodeNoReview)
				}
				continue
			}
			if errs[i] != nil {
				t.Fatalf("ask %d: %v", i, errs[i])
			}
			c, tu := convs[i], turns[i]
			if ids[c.ID] || tu.ConversationID != c.ID || tu.Number != 1 || c.Repository != f.repo.Name || c.PR != 7 {
				t.Errorf("ask %d: conversation %+v, turn %+v", i, c, tu)
			}
			ids[c.ID] = true
			got, err := s.Conversation(ctx, c.ID)
			if err != nil || len(got.Turns) != 1 || got.Turns[0].Question != tu.Question || got.Title != c.Title {
				t.Errorf("ask %d stored as %+v, %v", i, got, err)
			}
		}
	})
}

// TestEventsStoreTheirEncoding: an event that carries its encoding is
// stored as those bytes, not encoded again (appended and with an outcome).
func TestEventsStoreTheirEncoding(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		_, turn := f.converse(t)
		run := f.claim(t, turn.ID, "w1/1")
		// The encodings say other things than the fields: what is read back
		// shows which was stored.
		appended := textEvent(1, "fields")
		appended.Encoded = []byte(`{"seq":1,"type":"text_delta","text":"encoded once","at":"2026-01-02T03:04:05Z"}`)
		if err := s.AppendEvents(ctx, turn.ID, run.Fence, []chat.Event{appended}); err != nil {
			t.Fatal(err)
		}
		final := chat.Event{Seq: 2, Type: chat.EventNote, Text: "fields"}
		final.Encoded = []byte(`{"seq":2,"type":"note","text":"also encoded once","at":"2026-01-02T03:04:05Z"}`)
		if err := s.FinishTurn(ctx, turn.ID, run.Fence, chat.Outcome{State: chat.StateSucceeded, Events: []chat.Event{final}}); err != nil {
			t.Fatal(err)
		}
		evs, err := s.Events(ctx, turn.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, e := range evs {
			texts = append(texts, e.Text)
		}
		if diff := cmp.Diff([]string{"encoded once", "also encoded once"}, texts); diff != "" {
			t.Errorf("stored texts (-want +got):\n%s", diff)
		}
	})
}

// BenchmarkPendingTurns measures what a reconciler pass reads from the
// store: every pending turn of a backlog of 10,000 queued turns.
func BenchmarkPendingTurns(b *testing.B) {
	const backlog = 10_000
	for _, db := range storetest.Databases() {
		b.Run(db.Name, func(b *testing.B) {
			s := db.New(b)
			ctx := b.Context()
			review := setup(b, s).review
			var wg sync.WaitGroup
			var failed atomic.Pointer[error]
			for w := range 40 {
				wg.Go(func() {
					for range backlog / 40 {
						c := chat.Conversation{ReviewID: review.ID}
						turn := chat.Turn{Question: fmt.Sprint("Why does worker ", w, " ask?"), Focus: &chat.Focus{Kind: chat.FocusOverview}}
						if err := s.CreateConversation(ctx, &c, &turn); err != nil {
							failed.Store(&err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
			b.ResetTimer()
			var n int
			for b.Loop() {
				turns, err := s.PendingTurns(ctx)
				if err != nil {
					b.Fatal(err)
				}
				n = len(turns)
			}
			b.ReportMetric(float64(n), "turns/op")
		})
	}
}
