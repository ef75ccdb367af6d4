package chat

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Scope is what an API token may do. Each scope includes the ones before
// it: read lists, reads, polls and subscribes; ask also asks and cancels;
// admin also registers repositories, records reviews and manages
// providers, keys, tokens and deletions.
type Scope string

// The scopes of API tokens, weakest first.
const (
	ScopeRead  Scope = "read"
	ScopeAsk   Scope = "ask"
	ScopeAdmin Scope = "admin"
)

var scopeRank = map[Scope]int{ScopeRead: 1, ScopeAsk: 2, ScopeAdmin: 3}

// Valid reports whether s is one of the scopes.
func (s Scope) Valid() bool { return scopeRank[s] > 0 }

// Includes reports whether a token of scope s may do what need allows.
func (s Scope) Includes(need Scope) bool {
	return s.Valid() && scopeRank[s] >= scopeRank[need]
}

// TokenPrefix starts every API token, so that a token is recognised in
// logs and by secret scanners.
const TokenPrefix = "prc_"

// tokenBytes is how many random bytes a token carries; tokenDigits is how
// many base62 digits they take (62^43 > 2^256).
const (
	tokenBytes  = 32
	tokenDigits = 43
)

// Token is an API token as stored: its name, scope and repositories, never
// its value.
type Token struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Scope Scope  `json:"scope"`
	// Repos limits the token to these repositories (owner/name); empty
	// means every repository.
	Repos      []string   `json:"repos"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
}

// Sees reports whether the token may see the repository named repo.
func (t Token) Sees(repo string) bool {
	return len(t.Repos) == 0 || slices.Contains(t.Repos, repo)
}

// Limited reports whether the token is limited to some repositories.
func (t Token) Limited() bool { return len(t.Repos) > 0 }

// TokenStore keeps API tokens by the hash of their value. Implemented by
// package store.
type TokenStore interface {
	// CreateToken stores t with the hash of its value and fills t's ID and
	// CreatedAt.
	CreateToken(ctx context.Context, t *Token, hash []byte) error
	// TokenByHash returns the token whose value hashes to hash, with the
	// stored hash; none is an *Error with CodeNotFound.
	TokenByHash(ctx context.Context, hash []byte) (Token, []byte, error)
	// Tokens lists every token, revoked ones too, oldest first.
	Tokens(ctx context.Context) ([]Token, error)
	// RevokeToken marks a token revoked at at (a revoked one stays as it
	// was) and returns it; an unknown id is an *Error with CodeNotFound.
	RevokeToken(ctx context.Context, id string, at time.Time) (Token, error)
	// TouchToken records that a token was used at at.
	TouchToken(ctx context.Context, id string, at time.Time) error
	// CountTokens counts the tokens ever made, revoked ones too.
	CountTokens(ctx context.Context) (int64, error)
}

// AccessConfig holds the settings of Access.
type AccessConfig struct {
	// TouchEvery is how often a token's last_used_at is written while it
	// is used: at most once per this time per token and process, so that
	// requests do not each write. Default 1m.
	TouchEvery time.Duration
	// CountEvery is how long Required trusts its last count of tokens
	// while there were none: a token made meanwhile (by `prchat token
	// create`, on the database directly) is enforced within this time.
	// Once a token exists the answer never changes back (revoked tokens
	// count), so it is not asked again. Default 1s.
	CountEvery time.Duration
	Logger     *slog.Logger
	// Now tells the time; default time.Now.
	Now Clock
}

// Access makes, lists, revokes and checks API tokens.
//
// A token is "prc_" and 43 base62 digits of 32 random bytes. Only its
// SHA-256 is stored: a fast unkeyed hash is enough for a value with 256
// bits of entropy (nothing can be guessed from it, and no key has to be
// shared with `prchat token create`, which writes to the database
// directly). A token is looked up by its hash and the hashes are then
// compared in constant time.
type Access struct {
	cfg   AccessConfig
	store TokenStore
	log   *slog.Logger
	now   Clock

	mu        sync.Mutex
	touched   map[string]time.Time // token id -> when last_used_at was written
	required  bool
	countedAt time.Time
}

// NewAccess returns Access over store.
func NewAccess(cfg AccessConfig, store TokenStore) (*Access, error) {
	if store == nil {
		return nil, errors.New("chat: a token store is required")
	}
	if cfg.TouchEvery < 0 || cfg.CountEvery < 0 {
		return nil, errors.New("chat: access intervals must not be negative")
	}
	cfg.TouchEvery = cmp.Or(cfg.TouchEvery, time.Minute)
	cfg.CountEvery = cmp.Or(cfg.CountEvery, time.Second)
	a := &Access{cfg: cfg, store: store, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)), now: cfg.Now, touched: map[string]time.Time{}}
	if a.now == nil {
		a.now = time.Now
	}
	return a, nil
}

// HashToken returns the stored form of a token's value.
func HashToken(value string) []byte {
	h := sha256.Sum256([]byte(value))
	return h[:]
}

// newTokenValue returns a fresh token: the prefix and 43 base62 digits.
func newTokenValue() string {
	var b [tokenBytes]byte
	_, _ = rand.Read(b[:])
	digits := new(big.Int).SetBytes(b[:]).Text(62)
	return TokenPrefix + strings.Repeat("0", tokenDigits-len(digits)) + digits
}

// maxTokenName is the longest token name, in bytes.
const maxTokenName = 200

// CreateToken makes a token and returns it with its value, which is shown
// this once and never stored.
func (a *Access) CreateToken(ctx context.Context, name string, scope Scope, repos []string) (Token, string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return Token{}, "", Errorf(CodeInvalid, "a token needs a name")
	case len(name) > maxTokenName || !utf8.ValidString(name) || strings.ContainsFunc(name, isControl):
		return Token{}, "", Errorf(CodeInvalid, "a token name is at most %d bytes of printable text", maxTokenName)
	case !scope.Valid():
		return Token{}, "", Errorf(CodeInvalid, "scope must be read, ask or admin, not %q", scope)
	}
	seen := map[string]bool{}
	clean := []string{}
	for _, r := range repos {
		if err := CheckRepoName(r); err != nil {
			return Token{}, "", err
		}
		if !seen[r] {
			seen[r] = true
			clean = append(clean, r)
		}
	}
	slices.Sort(clean)
	value := newTokenValue()
	t := Token{Name: name, Scope: scope, Repos: clean}
	if err := a.store.CreateToken(ctx, &t, HashToken(value)); err != nil {
		return Token{}, "", err
	}
	a.mu.Lock()
	a.required = true
	a.mu.Unlock()
	return t, value, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// Tokens lists every token, revoked ones too.
func (a *Access) Tokens(ctx context.Context) ([]Token, error) { return a.store.Tokens(ctx) }

// RevokeToken revokes a token at once: the next request with it is
// refused.
func (a *Access) RevokeToken(ctx context.Context, id string) (Token, error) {
	if id == "" || len(id) > 64 || strings.ContainsFunc(id, isControl) {
		return Token{}, Errorf(CodeNotFound, "token %q not found", id)
	}
	return a.store.RevokeToken(ctx, id, a.now().UTC().Truncate(time.Microsecond))
}

// errUnauthorized is the answer to every token that does not check out,
// whatever the cause, so that a client learns nothing from it.
func errUnauthorized(why string) error {
	return Errorf(CodeUnauthorized, "%s", why)
}

// Authenticate returns the live token whose value is value. An unknown or
// revoked token is an *Error with CodeUnauthorized.
func (a *Access) Authenticate(ctx context.Context, value string) (Token, error) {
	if !strings.HasPrefix(value, TokenPrefix) || len(value) != len(TokenPrefix)+tokenDigits {
		return Token{}, errUnauthorized("the token is not a prchat API token")
	}
	hash := HashToken(value)
	t, stored, err := a.store.TokenByHash(ctx, hash)
	if ErrorCode(err) == CodeNotFound {
		return Token{}, errUnauthorized("the token is not known")
	}
	if err != nil {
		return Token{}, fmt.Errorf("authenticate: %w", err)
	}
	if subtle.ConstantTimeCompare(hash, stored) != 1 {
		return Token{}, errUnauthorized("the token is not known")
	}
	if t.RevokedAt != nil {
		return Token{}, errUnauthorized("the token was revoked")
	}
	a.touch(ctx, t.ID)
	return t, nil
}

// touch writes a token's last_used_at, at most once per TouchEvery.
func (a *Access) touch(ctx context.Context, id string) {
	now := a.now()
	a.mu.Lock()
	last, ok := a.touched[id]
	if ok && now.Sub(last) < a.cfg.TouchEvery {
		a.mu.Unlock()
		return
	}
	if len(a.touched) > 10_000 {
		clear(a.touched)
	}
	a.touched[id] = now
	a.mu.Unlock()
	if err := a.store.TouchToken(ctx, id, now.UTC().Truncate(time.Microsecond)); err != nil {
		a.log.WarnContext(ctx, "record token use", slog.String("token_id", id), slog.Any("err", err))
	}
}

// Required reports whether requests need a token: once any token was made
// (revoked ones count, so that revoking the last token does not open the
// API again). While there is none, the count is asked again at most once
// per CountEvery.
func (a *Access) Required(ctx context.Context) (bool, error) {
	a.mu.Lock()
	if a.required || (!a.countedAt.IsZero() && a.now().Sub(a.countedAt) < a.cfg.CountEvery) {
		req := a.required
		a.mu.Unlock()
		return req, nil
	}
	a.mu.Unlock()
	n, err := a.store.CountTokens(ctx)
	if err != nil {
		return true, fmt.Errorf("count tokens: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.countedAt = a.now()
	a.required = a.required || n > 0
	return a.required, nil
}

type tokenKey struct{}

// WithToken returns ctx carrying the token a request came with; the
// roles then show it only the repositories the token may see.
func WithToken(ctx context.Context, t Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, t)
}

// TokenFrom returns the token that ctx carries.
func TokenFrom(ctx context.Context) (Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(Token)
	return t, ok
}

// limitedToken returns the token of ctx if it is limited to some
// repositories.
func limitedToken(ctx context.Context) (Token, bool) {
	t, ok := TokenFrom(ctx)
	return t, ok && t.Limited()
}
