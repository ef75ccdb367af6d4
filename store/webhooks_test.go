package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/store"
	"github.com/prchat/prchat/store/storetest"
)

func newComment(delivery string, id int64, next time.Time) chat.WebhookComment {
	return chat.WebhookComment{
		Comment: chat.Comment{
			Forge: chat.ForgeGitHub, DeliveryID: delivery, Repository: "octo/widgets", PR: 7, CommentID: id,
			Question: "Why?", Thread: "42", Discussion: "d42", HTMLURL: "https://github.com/octo/widgets", Installation: 5,
			Focus: &chat.Focus{Kind: chat.FocusSection, Anchors: []chat.Anchor{{Path: "a.go", StartLine: 3, EndLine: 4}}},
		},
		TurnID: "turn-" + delivery, NextAttempt: next,
	}
}

func TestWebhookComments(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		now := time.Now().UTC().Truncate(time.Microsecond)

		c := newComment("d1", 100, now)
		if err := s.AddComment(ctx, &c); err != nil {
			t.Fatal(err)
		}
		if c.ID == "" || c.Version != 1 || c.State != chat.CommentReceived {
			t.Fatalf("added = %+v", c)
		}
		// The same delivery, or the same comment in another delivery, is a
		// duplicate; ten at once make one row.
		var wg sync.WaitGroup
		errs := make([]error, 10)
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := newComment("d2", 200, now)
				errs[i] = s.AddComment(ctx, &d)
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, chat.ErrDuplicate):
				t.Fatalf("concurrent add: %v", err)
			}
		}
		if ok != 1 {
			t.Fatalf("%d of ten concurrent adds succeeded, want 1", ok)
		}
		dup := newComment("d1", 300, now)
		if err := s.AddComment(ctx, &dup); !errors.Is(err, chat.ErrDuplicate) {
			t.Errorf("same delivery: %v, want ErrDuplicate", err)
		}
		dup = newComment("d3", 100, now)
		if err := s.AddComment(ctx, &dup); !errors.Is(err, chat.ErrDuplicate) {
			t.Errorf("same comment: %v, want ErrDuplicate", err)
		}
		gl := newComment("d3", 100, now)
		gl.Forge = chat.ForgeGitLab
		if err := s.AddComment(ctx, &gl); err != nil {
			t.Errorf("the same ids on another forge: %v", err)
		}

		// Due comments come back as stored.
		due, err := s.DueComments(ctx, now.Add(time.Second), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 3 {
			t.Fatalf("%d due, want 3", len(due))
		}
		if diff := cmp.Diff(c, due[0], cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
			t.Errorf("due[0] (-added +got):\n%s", diff)
		}

		// Updates are fenced by version.
		stale := due[0]
		got := due[0]
		got.State, got.ConversationID, got.TurnNumber, got.Reacted, got.PostTried = chat.CommentQueued, "conv", 1, true, true
		got.NextAttempt = now.Add(time.Hour)
		if err := s.UpdateComment(ctx, &got); err != nil || got.Version != 2 {
			t.Fatalf("update: %v, version %d", err, got.Version)
		}
		if err := s.UpdateComment(ctx, &stale); !errors.Is(err, chat.ErrFenced) {
			t.Errorf("stale update: %v, want ErrFenced", err)
		}
		due, err = s.DueComments(ctx, now.Add(time.Second), 10)
		if err != nil || len(due) != 2 {
			t.Fatalf("due after the lease: %d, %v", len(due), err)
		}
		later, err := s.DueComments(ctx, now.Add(2*time.Hour), 10)
		if err != nil || len(later) != 3 || !later[2].Reacted || !later[2].PostTried || later[2].State != chat.CommentQueued {
			t.Fatalf("due later: %+v, %v", later, err)
		}
		posted := later[2]
		posted.State = chat.CommentPosted
		if err := s.UpdateComment(ctx, &posted); err != nil {
			t.Fatal(err)
		}
		if due, _ := s.DueComments(ctx, now.Add(2*time.Hour), 10); len(due) != 2 {
			t.Errorf("a posted comment is still due")
		}

		// A thread keeps the first conversation it was given.
		id, err := s.ClaimThread(ctx, chat.ForgeGitHub, "octo/widgets", 7, "thread/42", "c1")
		if err != nil || id != "c1" {
			t.Fatalf("claim: %q, %v", id, err)
		}
		if id, err = s.ClaimThread(ctx, chat.ForgeGitHub, "octo/widgets", 7, "thread/42", "c2"); err != nil || id != "c1" {
			t.Errorf("second claim: %q, %v, want c1", id, err)
		}
		if id, err = s.ClaimThread(ctx, chat.ForgeGitHub, "octo/widgets", 8, "thread/42", "c3"); err != nil || id != "c3" {
			t.Errorf("another PR's thread: %q, %v, want c3", id, err)
		}
	})
}

// TestWebhookNotices: a comment that carries a notice is stored only for
// the first of its PR, however many arrive at once, and the claim holds
// for later ones; a duplicate of the first stores nothing either.
func TestWebhookNotices(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		now := time.Now().UTC()
		const n = 10
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				c := newComment(fmt.Sprint("n", i), int64(500+i), now)
				c.Repository, c.Refusal, c.Notice = "octo/unknown", "prchat does not know octo/unknown", chat.NoticeUnregistered
				errs[i] = s.AddComment(ctx, &c)
			})
		}
		close(start)
		wg.Wait()
		stored := 0
		for _, err := range errs {
			switch {
			case err == nil:
				stored++
			case !errors.Is(err, chat.ErrNoticed):
				t.Fatalf("add: %v", err)
			}
		}
		if stored != 1 {
			t.Fatalf("%d of %d comments with the notice stored, want 1", stored, n)
		}
		due, err := s.DueComments(ctx, now.Add(time.Second), 20)
		if err != nil || len(due) != 1 || due[0].Refusal != "prchat does not know octo/unknown" {
			t.Fatalf("due: %+v, %v; want the one comment with its refusal", due, err)
		}
		later := newComment("n-later", 600, now)
		later.Repository, later.Notice = "octo/unknown", chat.NoticeUnregistered
		if err := s.AddComment(ctx, &later); !errors.Is(err, chat.ErrNoticed) {
			t.Errorf("a later comment on the PR: %v, want ErrNoticed", err)
		}
		other := newComment("n-other", 601, now)
		other.Repository, other.PR, other.Notice = "octo/unknown", 8, chat.NoticeUnregistered
		if err := s.AddComment(ctx, &other); err != nil {
			t.Errorf("the first on another PR: %v", err)
		}
		// The refusal is kept through updates.
		d := due[0]
		d.Refusal = "changed"
		if err := s.UpdateComment(ctx, &d); err != nil {
			t.Fatal(err)
		}
		if due, err := s.DueComments(ctx, now.Add(time.Second), 20); err != nil || len(due) != 2 || due[0].Refusal != "changed" {
			t.Errorf("after the update: %+v, %v", due, err)
		}
	})
}
