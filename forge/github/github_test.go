package github_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/forge/github"
	"github.com/prchat/prchat/forge/github/githubtest"
)

func TestAppCredentialsAndRefusals(t *testing.T) {
	t.Parallel()
	fake := githubtest.New(t)
	fake.Install("acme/private", 7)
	c, err := github.New(github.Config{APIURL: fake.URL, AppID: fake.AppID, PrivateKey: fake.PrivateKeyPEM()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	user, tok, err := c.GitCredentials(ctx, "acme/private")
	if err != nil || user != "x-access-token" || tok == "" {
		t.Fatalf("credentials of an installed repository: %q %q %v", user, tok, err)
	}
	// Cached: the second call takes no new token.
	if _, again, _ := c.GitCredentials(ctx, "acme/private"); again != tok || fake.Tokens() != 1 {
		t.Errorf("token not cached: %d issued", fake.Tokens())
	}
	if user, tok, err := c.GitCredentials(ctx, "acme/public"); err != nil || user != "" || tok != "" {
		t.Errorf("a repository without the App: %q %q %v, want no credentials", user, tok, err)
	}
	if login, err := c.Login(ctx); err != nil || login != fake.Slug+"[bot]" {
		t.Errorf("login = %q, %v", login, err)
	}

	// A 404 is a refusal for good; a 502 is worth retrying.
	ref := chat.CommentRef{Repository: "acme/private", PR: 9, Installation: 7}
	if _, _, err := c.PullRequest(ctx, ref); !errors.Is(err, chat.ErrForgeRefused) {
		t.Errorf("unknown PR: %v, want ErrForgeRefused", err)
	}
	fake.Fail("POST", "/repos/acme/private/issues/9/comments", http.StatusBadGateway, 1)
	if _, err := c.PostReply(ctx, ref, "hello"); err == nil || errors.Is(err, chat.ErrForgeRefused) {
		t.Errorf("502: %v, want a retryable error", err)
	}
	if _, err := c.PostReply(ctx, ref, "hello <!-- m -->"); err != nil {
		t.Fatal(err)
	}
	if id, err := c.FindReply(ctx, ref, "<!-- m -->"); err != nil || id == "" {
		t.Errorf("FindReply = %q, %v", id, err)
	}
}
