package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// TestAskBatchFailsOneByOne: a batch whose transaction fails is committed
// again ask by ask, so only the bad ask fails; an ask about a missing
// review fails alone without failing its batch.
func TestAskBatchFailsOneByOne(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{SQLitePath: filepath.Join(t.TempDir(), "p.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	repo := chat.Repository{Name: "acme/a", ClonePath: "/srv/a"}
	if _, err := s.UpsertRepository(ctx, &repo); err != nil {
		t.Fatal(err)
	}
	rev := chat.Review{RepositoryID: repo.ID, Repository: repo.Name, PR: 1, HeadSHA: "h", Backend: "local", Sections: []chat.Section{}}
	if err := s.CreateReview(ctx, &rev); err != nil {
		t.Fatal(err)
	}
	ask := func(id string, review int64) *newAsk {
		return prepareAsk(ctx, &chat.Conversation{ID: id, ReviewID: review}, &chat.Turn{Question: "why " + id})
	}

	// Together, all fine but the missing review.
	ok1, missing, ok2 := ask("c1", rev.ID), ask("c2", rev.ID+1), ask("c3", rev.ID)
	s.asks.commit([]*newAsk{ok1, missing, ok2})
	if ok1.err != nil || ok2.err != nil || chat.ErrorCode(missing.err) != chat.CodeNoReview {
		t.Fatalf("errors %v, %v, %v; want nil, %s, nil", ok1.err, missing.err, ok2.err, chat.CodeNoReview)
	}

	// A conversation id taken fails the batch's transaction; the rest then
	// goes in one by one.
	fine, taken := ask("c4", rev.ID), ask("c1", rev.ID)
	s.asks.commit([]*newAsk{fine, taken})
	if fine.err != nil || taken.err == nil {
		t.Fatalf("errors %v, %v; want nil, a conflict", fine.err, taken.err)
	}
	for _, id := range []string{"c1", "c3", "c4"} {
		c, err := s.Conversation(ctx, id)
		if err != nil || len(c.Turns) != 1 || c.Turns[0].Question != "why "+id {
			t.Errorf("conversation %s: %+v, %v", id, c, err)
		}
	}
	if _, err := s.Conversation(ctx, "c2"); chat.ErrorCode(err) != chat.CodeNotFound {
		t.Errorf("conversation of the missing review: %v, want not found", err)
	}
	for _, a := range []*newAsk{ok1, missing, ok2, fine, taken} {
		select {
		case <-a.done:
		default:
			t.Errorf("ask %s not told its outcome", a.c.ID)
		}
	}
}

// TestAskAfterCloseFails: asking a closed store fails at once, and an ask
// racing with Close is answered either way, never left waiting.
func TestAskAfterCloseFails(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{SQLitePath: filepath.Join(t.TempDir(), "p.db")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 100)
	for range 100 {
		go func() { done <- s.CreateConversation(ctx, &chat.Conversation{ReviewID: 1}, &chat.Turn{Question: "q"}) }()
	}
	_ = s.Close()
	for range 100 {
		chattest.Receive(t, "an answer to each ask racing with Close", done)
	}
	if err := s.CreateConversation(ctx, &chat.Conversation{ReviewID: 1}, &chat.Turn{Question: "q"}); err == nil {
		t.Fatal("an ask of a closed store succeeded")
	}
}
