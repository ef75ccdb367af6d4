package store_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/store"
	"github.com/prchat/prchat/store/storetest"
)

// sealed is a stored form of a session file, as chat seals it (the store
// keeps the bytes as they are).
func sealed(owner chat.SessionOwner, id, body string) chat.SealedSessionFile {
	return chat.SealedSessionFile{
		Owner: owner, Backend: chat.BackendClaudeCode, SessionID: id, Cwd: "/laptop/review",
		Sealed: []byte("sealed:" + body), Size: int64(len(body)), Digest: "digest-of-" + body,
	}
}

var ignoreUpdatedAt = cmpopts.IgnoreFields(chat.SealedSessionFile{}, "UpdatedAt")

func TestReviewSessionFile(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		owner := chat.SessionOwner{ReviewID: f.review.ID}

		_, err := s.SessionFile(ctx, owner)
		wantCode(t, err, chat.CodeNotFound)

		first := sealed(owner, "rev-session", "one")
		if err := s.PutReviewSessionFile(ctx, first); err != nil {
			t.Fatal(err)
		}
		// Replacing is allowed until the first conversation starts.
		second := sealed(owner, "rev-session", "two")
		if err := s.PutReviewSessionFile(ctx, second); err != nil {
			t.Fatal(err)
		}
		got, err := s.SessionFile(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(second, got, ignoreUpdatedAt); diff != "" {
			t.Errorf("stored file (-want +got):\n%s", diff)
		}
		if got.UpdatedAt.IsZero() {
			t.Error("stored file has no updated time")
		}

		// A review that is not there.
		err = s.PutReviewSessionFile(ctx, sealed(chat.SessionOwner{ReviewID: f.review.ID + 100}, "x", "x"))
		wantCode(t, err, chat.CodeNoReview)

		// After a conversation: conflict, the stored file unchanged.
		f.converse(t)
		err = s.PutReviewSessionFile(ctx, sealed(owner, "rev-session", "three"))
		wantCode(t, err, chat.CodeConflict)
		got, err = s.SessionFile(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(second, got, ignoreUpdatedAt); diff != "" {
			t.Errorf("stored file after the refused replace (-want +got):\n%s", diff)
		}
	})
}

func TestConversationSessionFileIsFenced(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		f := setup(t, s)
		c, turn := f.converse(t)
		owner := chat.SessionOwner{ConversationID: c.ID}

		stale := f.claim(t, turn.ID, "w1/1")
		current := f.claim(t, turn.ID, "w2/1") // a takeover: stale is fenced off
		staleFile := sealed(owner, "conv-session", "stale")
		err := s.FinishTurn(ctx, turn.ID, stale.Fence, chat.Outcome{State: chat.StateSucceeded, SessionFile: &staleFile})
		wantIs(t, err, chat.ErrFenced)
		_, err = s.SessionFile(ctx, owner)
		wantCode(t, err, chat.CodeNotFound)

		file := sealed(owner, "conv-session", "turn one")
		info := &chat.SessionInfo{SessionID: "conv-session", SessionHost: "w2", RunDir: "/runs/c1", Backend: chat.BackendClaudeCode, Session: chat.SessionForked}
		if err := s.FinishTurn(ctx, turn.ID, current.Fence, chat.Outcome{State: chat.StateSucceeded, Conversation: info, SessionFile: &file}); err != nil {
			t.Fatal(err)
		}
		got, err := s.SessionFile(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(file, got, ignoreUpdatedAt); diff != "" {
			t.Errorf("stored file (-want +got):\n%s", diff)
		}

		// The next turn replaces it.
		next := chat.Turn{ConversationID: c.ID, Question: "and then?"}
		if err := s.AddTurn(ctx, &next); err != nil {
			t.Fatal(err)
		}
		run := f.claim(t, next.ID, "w2/1")
		file2 := sealed(owner, "conv-session", "turn two")
		if err := s.FinishTurn(ctx, next.ID, run.Fence, chat.Outcome{State: chat.StateSucceeded, Conversation: info, SessionFile: &file2}); err != nil {
			t.Fatal(err)
		}
		if got, err = s.SessionFile(ctx, owner); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(file2, got, ignoreUpdatedAt); diff != "" {
			t.Errorf("stored file after turn 2 (-want +got):\n%s", diff)
		}

		// Deleted with its conversation; the review's stays until its review goes.
		revOwner := chat.SessionOwner{ReviewID: f.review.ID}
		if err := s.DeleteConversation(ctx, c.ID); err != nil {
			t.Fatal(err)
		}
		_, err = s.SessionFile(ctx, owner)
		wantCode(t, err, chat.CodeNotFound)
		if err := s.PutReviewSessionFile(ctx, sealed(revOwner, "rev-session", "r")); err != nil {
			t.Fatal(err)
		}
	})
}
