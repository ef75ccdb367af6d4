package chat_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/store/storetest"
)

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestAccessTokens(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	a, err := chat.NewAccess(chat.AccessConfig{Now: clock.Now}, st)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if req, err := a.Required(ctx); err != nil || req {
		t.Fatalf("Required with no token = %v, %v; want false", req, err)
	}

	tok, value, err := a.CreateToken(ctx, "ci", chat.ScopeAsk, []string{"acme/b", "acme/a", "acme/b"})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^prc_[0-9A-Za-z]{43}$`).MatchString(value) {
		t.Errorf("token value %q is not prc_ and 43 base62 digits", value)
	}
	if got := tok.Repos; len(got) != 2 || got[0] != "acme/a" || got[1] != "acme/b" {
		t.Errorf("repos = %v, want [acme/a acme/b]", got)
	}
	if req, _ := a.Required(ctx); !req {
		t.Error("Required after a token was made = false")
	}

	got, err := a.Authenticate(ctx, value)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != tok.ID || got.Scope != chat.ScopeAsk {
		t.Errorf("Authenticate = %+v, want the token %s", got, tok.ID)
	}
	list, _ := a.Tokens(ctx)
	if len(list) != 1 || list[0].LastUsedAt == nil || !list[0].LastUsedAt.Equal(clock.Now()) {
		t.Fatalf("after use, tokens = %+v; want last_used_at %v", list, clock.Now())
	}
	// Within a minute a use is not written again; after it, it is.
	first := *list[0].LastUsedAt
	clock.Add(30 * time.Second)
	_, _ = a.Authenticate(ctx, value)
	list, _ = a.Tokens(ctx)
	if !list[0].LastUsedAt.Equal(first) {
		t.Errorf("last_used_at was written again within a minute")
	}
	clock.Add(31 * time.Second)
	_, _ = a.Authenticate(ctx, value)
	list, _ = a.Tokens(ctx)
	if !list[0].LastUsedAt.Equal(clock.Now()) {
		t.Errorf("last_used_at = %v after a minute, want %v", list[0].LastUsedAt, clock.Now())
	}

	// The token with its last character changed (to one it does not end in).
	last := "x"
	if strings.HasSuffix(value, last) {
		last = "y"
	}
	for _, bad := range []string{"", "Bearer x", "prc_short", value[:len(value)-1] + last, value + "0"} {
		if _, err := a.Authenticate(ctx, bad); chat.ErrorCode(err) != chat.CodeUnauthorized {
			t.Errorf("Authenticate(%q) = %v, want unauthorized", bad, err)
		}
	}

	if _, err := a.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, value); chat.ErrorCode(err) != chat.CodeUnauthorized {
		t.Errorf("revoked token: %v, want unauthorized", err)
	}
	if _, err := a.RevokeToken(ctx, "00000000-0000-0000-0000-000000000000"); chat.ErrorCode(err) != chat.CodeNotFound {
		t.Errorf("revoke unknown: %v, want not_found", err)
	}
	// A revoked token still counts: revoking the last one does not open
	// the API again.
	b, _ := chat.NewAccess(chat.AccessConfig{Now: clock.Now}, st)
	if req, _ := b.Required(ctx); !req {
		t.Error("Required with only a revoked token = false")
	}

	for _, c := range []struct {
		name  string
		scope chat.Scope
		repos []string
	}{{"", chat.ScopeRead, nil}, {"x", "root", nil}, {"x", chat.ScopeRead, []string{"../etc"}}, {"a\x00b", chat.ScopeRead, nil}} {
		if _, _, err := a.CreateToken(ctx, c.name, c.scope, c.repos); chat.ErrorCode(err) != chat.CodeInvalid {
			t.Errorf("CreateToken(%q, %q, %v) = %v, want invalid", c.name, c.scope, c.repos, err)
		}
	}
}

// TestAccessRequiredSeesTokensOfOtherProcesses: a token made elsewhere
// (prchat token create on the database) is enforced once the count is
// asked again, after CountEvery.
func TestAccessRequiredSeesTokensOfOtherProcesses(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	server, _ := chat.NewAccess(chat.AccessConfig{Now: clock.Now, CountEvery: time.Second}, st)
	cli, _ := chat.NewAccess(chat.AccessConfig{Now: clock.Now}, st)
	ctx := context.Background()
	if req, _ := server.Required(ctx); req {
		t.Fatal("required with no token")
	}
	if _, _, err := cli.CreateToken(ctx, "first admin", chat.ScopeAdmin, nil); err != nil {
		t.Fatal(err)
	}
	if req, _ := server.Required(ctx); req {
		t.Error("the cached count was asked again before CountEvery")
	}
	clock.Add(time.Second)
	if req, _ := server.Required(ctx); !req {
		t.Error("a token made by another process is not enforced after CountEvery")
	}
}

func TestScopes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		have, need chat.Scope
		ok         bool
	}{
		{chat.ScopeRead, chat.ScopeRead, true}, {chat.ScopeRead, chat.ScopeAsk, false}, {chat.ScopeRead, chat.ScopeAdmin, false},
		{chat.ScopeAsk, chat.ScopeRead, true}, {chat.ScopeAsk, chat.ScopeAsk, true}, {chat.ScopeAsk, chat.ScopeAdmin, false},
		{chat.ScopeAdmin, chat.ScopeAdmin, true}, {"", chat.ScopeRead, false}, {"root", chat.ScopeRead, false},
	}
	for _, c := range cases {
		if got := c.have.Includes(c.need); got != c.ok {
			t.Errorf("%q.Includes(%q) = %v, want %v", c.have, c.need, got, c.ok)
		}
	}
}
