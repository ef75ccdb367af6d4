package store_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/store"
	"github.com/prchat/prchat/store/storetest"
)

// askAt starts a conversation on review with a first turn asked at at, and
// settles it as o unless o.State is empty (it stays queued).
func askAt(t *testing.T, s *store.Store, review chat.Review, at time.Time, o chat.Outcome) chat.Turn {
	t.Helper()
	ctx := t.Context()
	c := chat.Conversation{ReviewID: review.ID, Title: "q", Backend: o.Backend, CreatedAt: at}
	turn := chat.Turn{Question: "q?", CreatedAt: at, Backend: o.Backend}
	if err := s.CreateConversation(ctx, &c, &turn); err != nil {
		t.Fatal(err)
	}
	if o.State == "" {
		return turn
	}
	claimed, err := s.ClaimTurn(ctx, turn.ID, "w1/a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.State == chat.StateRunning {
		return claimed
	}
	if err := s.FinishTurn(ctx, turn.ID, claimed.Fence, o); err != nil {
		t.Fatal(err)
	}
	got, err := s.TurnByID(ctx, turn.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestTurnFactsWindowAndRepository(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := setup(t, s)
		ctx := t.Context()
		other := chat.Repository{Name: "octo/other", ClonePath: "/srv/git/other"}
		if _, err := s.UpsertRepository(ctx, &other); err != nil {
			t.Fatal(err)
		}
		otherReview := chat.Review{Repository: other.Name, PR: 1, HeadSHA: "h", BaseSHA: "b"}
		if err := s.CreateReview(ctx, &otherReview); err != nil {
			t.Fatal(err)
		}
		since := time.Now().UTC().Add(-time.Hour).Truncate(time.Microsecond)
		cost := 0.25
		old := askAt(t, s, f.review, since.Add(-time.Second), chat.Outcome{State: chat.StateSucceeded, Backend: "openai"})
		oldQueued := askAt(t, s, f.review, since.Add(-2*time.Hour), chat.Outcome{Backend: "openai"})
		atEdge := askAt(t, s, f.review, since, chat.Outcome{State: chat.StateFailed, Reason: chat.ReasonTimeout, Backend: "codex"})
		inside := askAt(t, s, f.review, since.Add(time.Minute), chat.Outcome{
			State: chat.StateSucceeded, Backend: "openai", Session: chat.SessionSeeded,
			Usage: chat.Usage{Repairs: 2, CostUSD: &cost},
		})
		elsewhere := askAt(t, s, otherReview, since.Add(time.Minute), chat.Outcome{State: chat.StateRunning, Backend: "openai"})
		_ = old

		facts, err := s.TurnFacts(ctx, since, f.repo.Name)
		if err != nil {
			t.Fatal(err)
		}
		got := map[time.Time]chat.TurnFact{}
		for _, fa := range facts {
			got[fa.CreatedAt] = fa
		}
		if len(facts) != 3 {
			t.Fatalf("facts of %s since %s: %d, want 3 (the edge, the inside and the old queued turn): %+v", f.repo.Name, since, len(facts), facts)
		}
		for _, want := range []chat.Turn{oldQueued, atEdge, inside} {
			if _, ok := got[want.CreatedAt]; !ok {
				t.Errorf("no fact of the turn asked at %s", want.CreatedAt)
			}
		}
		in := got[inside.CreatedAt]
		wantIn := chat.TurnFact{
			Repository: f.repo.Name, Backend: "openai", State: chat.StateSucceeded, Session: chat.SessionSeeded,
			Repairs: 2, CostUSD: &cost, CreatedAt: inside.CreatedAt, FinishedAt: inside.FinishedAt,
		}
		if d := cmp.Diff(wantIn, in); d != "" {
			t.Errorf("fact of the inside turn (-want +got):\n%s", d)
		}
		if e := got[atEdge.CreatedAt]; e.Reason != chat.ReasonTimeout || e.State != chat.StateFailed {
			t.Errorf("edge turn: %+v", e)
		}

		all, err := s.TurnFacts(ctx, since, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 4 {
			t.Fatalf("facts of every repository: %d, want 4", len(all))
		}
		var found bool
		for _, fa := range all {
			if fa.Repository == other.Name && fa.State == chat.StateRunning && fa.CreatedAt.Equal(elsewhere.CreatedAt) {
				found = true
			}
		}
		if !found {
			t.Errorf("the running turn of %s is missing: %+v", other.Name, all)
		}
	})
}

func TestPullRequests(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := setup(t, s)
		ctx := t.Context()
		second := chat.Review{Repository: f.repo.Name, PR: 7, HeadSHA: "h2", BaseSHA: "b1", CreatedAt: f.review.CreatedAt.Add(time.Minute)}
		if err := s.CreateReview(ctx, &second); err != nil {
			t.Fatal(err)
		}
		older := chat.Review{Repository: f.repo.Name, PR: 3, HeadSHA: "h3", BaseSHA: "b3", CreatedAt: f.review.CreatedAt.Add(-time.Hour)}
		if err := s.CreateReview(ctx, &older); err != nil {
			t.Fatal(err)
		}
		conv := askAt(t, s, older, f.review.CreatedAt.Add(time.Hour), chat.Outcome{})
		_ = conv

		prs, err := s.PullRequests(ctx, f.repo.Name)
		if err != nil {
			t.Fatal(err)
		}
		want := []chat.PullRequest{
			// PR 3's conversation is its newest activity.
			{Repository: f.repo.Name, PR: 3, LatestVersion: 1, HeadSHA: "h3", Conversations: 1, UpdatedAt: f.review.CreatedAt.Add(time.Hour)},
			{Repository: f.repo.Name, PR: 7, LatestVersion: 2, HeadSHA: "h2", Conversations: 0, UpdatedAt: second.CreatedAt},
		}
		if d := cmp.Diff(want, prs); d != "" {
			t.Errorf("pull requests (-want +got):\n%s", d)
		}
		if _, err := s.PullRequests(ctx, "octo/missing"); chat.ErrorCode(err) != chat.CodeRepositoryNotFound {
			t.Errorf("unknown repository: %v", err)
		}
	})
}
