package store_test

import (
	"testing"
	"time"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/store"
	"github.com/prchat/prchat/store/storetest"
)

// TestForgeProject: a repository's forge project is stored, found, changed
// by registering again, and named by one repository at most; a webhook
// question keeps it.
func TestForgeProject(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		w := chat.Repository{Name: "platform/widget", ClonePath: "/w", ForgeProject: "acme/platform/widget"}
		if _, err := s.UpsertRepository(ctx, &w); err != nil {
			t.Fatal(err)
		}
		plain := chat.Repository{Name: "acme/plain", ClonePath: "/p"}
		if _, err := s.UpsertRepository(ctx, &plain); err != nil {
			t.Fatal(err)
		}
		if got, err := s.RepositoryByForgeProject(ctx, "acme/platform/widget"); err != nil || got.Name != w.Name || got.ForgeProject != w.ForgeProject {
			t.Fatalf("by forge project = %+v, %v", got, err)
		}
		if got, err := s.Repository(ctx, "platform/widget"); err != nil || got.ForgeProject != "acme/platform/widget" {
			t.Fatalf("by name = %+v, %v", got, err)
		}
		for _, p := range []string{"acme/plain", "", "acme/platform"} {
			_, err := s.RepositoryByForgeProject(ctx, p)
			wantCode(t, err, chat.CodeRepositoryNotFound)
		}

		// Another repository naming the same project is a conflict, and
		// changes nothing.
		other := chat.Repository{Name: "acme/other", ClonePath: "/o", ForgeProject: "acme/platform/widget"}
		_, err := s.UpsertRepository(ctx, &other)
		wantCode(t, err, chat.CodeConflict)
		if _, err := s.Repository(ctx, "acme/other"); chat.ErrorCode(err) != chat.CodeRepositoryNotFound {
			t.Errorf("the refused repository was stored: %v", err)
		}
		again := chat.Repository{Name: "acme/plain", ClonePath: "/p", ForgeProject: "acme/platform/widget"}
		_, err = s.UpsertRepository(ctx, &again)
		wantCode(t, err, chat.CodeConflict)
		if got, _ := s.Repository(ctx, "acme/plain"); got.ForgeProject != "" {
			t.Errorf("acme/plain took the project: %+v", got)
		}

		// Registering again changes the project, or clears it.
		moved := chat.Repository{Name: "platform/widget", ClonePath: "/w", ForgeProject: "acme/platform/widget2"}
		if created, err := s.UpsertRepository(ctx, &moved); err != nil || created || moved.ForgeProject != "acme/platform/widget2" {
			t.Fatalf("move: %+v created %v, %v", moved, created, err)
		}
		if _, err := s.RepositoryByForgeProject(ctx, "acme/platform/widget"); chat.ErrorCode(err) != chat.CodeRepositoryNotFound {
			t.Errorf("the old project still finds a repository: %v", err)
		}
		cleared := chat.Repository{Name: "platform/widget", ClonePath: "/w"}
		if _, err := s.UpsertRepository(ctx, &cleared); err != nil || cleared.ForgeProject != "" {
			t.Fatalf("clear: %+v, %v", cleared, err)
		}

		// A webhook question keeps the forge's project.
		c := chat.WebhookComment{Comment: chat.Comment{Forge: chat.ForgeGitLab, DeliveryID: "k1", Repository: "platform/widget",
			ForgeProject: "acme/platform/widget", PR: 7, CommentID: 1, Question: "Why?", Thread: "d1", Discussion: "d1"},
			TurnID: "t1", State: chat.CommentReceived}
		if err := s.AddComment(ctx, &c); err != nil {
			t.Fatal(err)
		}
		due, err := s.DueComments(ctx, time.Now().Add(time.Hour), 10)
		if err != nil || len(due) != 1 || due[0].ForgeProject != "acme/platform/widget" || due[0].Repository != "platform/widget" {
			t.Fatalf("due comments = %+v, %v", due, err)
		}
	})
}
