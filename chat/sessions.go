package chat

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// SessionStore keeps dashboard sessions by the hash of their id.
// Implemented by package store.
type SessionStore interface {
	// CreateSession stores a session of the token tokenID.
	CreateSession(ctx context.Context, hash []byte, tokenID string, createdAt, expiresAt time.Time) error
	// SessionToken returns the token of a session that has not expired at
	// now; none is an *Error with CodeNotFound.
	SessionToken(ctx context.Context, hash []byte, now time.Time) (Token, error)
	DeleteSession(ctx context.Context, hash []byte) error
}

// DefaultSessionLifetime is how long a dashboard sign-in lasts.
const DefaultSessionLifetime = 12 * time.Hour

// Sessions are the dashboard's sign-ins (DESIGN §6 "Access"). Signing in
// takes an API token once and makes a session: a random id of 32 bytes,
// of which only the SHA-256 is stored with the token's id and an expiry.
// The browser's cookie holds the id, never the token, so signing out (the
// session is deleted) ends it everywhere, and a stolen cookie is worth
// nothing after sign-out, expiry or the token's revocation.
type Sessions struct {
	access   *Access
	store    SessionStore
	lifetime time.Duration
	now      Clock
}

// NewSessions returns the sessions of tokens checked by access, kept in
// store, each lasting lifetime (default DefaultSessionLifetime).
func NewSessions(access *Access, store SessionStore, lifetime time.Duration) (*Sessions, error) {
	if access == nil || store == nil {
		return nil, errors.New("chat: sessions need access and a store")
	}
	return &Sessions{access: access, store: store, lifetime: cmp.Or(lifetime, DefaultSessionLifetime), now: access.now}, nil
}

// Lifetime is how long a session lasts.
func (s *Sessions) Lifetime() time.Duration { return s.lifetime }

// SignIn checks an API token and returns a new session's id. A token that
// does not check out is an *Error with CodeUnauthorized.
func (s *Sessions) SignIn(ctx context.Context, token string) (string, Token, error) {
	t, err := s.access.Authenticate(ctx, token)
	if err != nil {
		return "", Token{}, err
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	id := base64.RawURLEncoding.EncodeToString(b[:])
	now := s.now().UTC().Truncate(time.Microsecond)
	if err := s.store.CreateSession(ctx, HashToken(id), t.ID, now, now.Add(s.lifetime)); err != nil {
		return "", Token{}, fmt.Errorf("sign in: %w", err)
	}
	return id, t, nil
}

// Authenticate returns the live token of a session id. A session that is
// unknown, expired or signed out, or whose token was revoked, is an
// *Error with CodeUnauthorized.
func (s *Sessions) Authenticate(ctx context.Context, id string) (Token, error) {
	if id == "" || len(id) > 100 {
		return Token{}, errUnauthorized("the session is not known")
	}
	t, err := s.store.SessionToken(ctx, HashToken(id), s.now())
	if ErrorCode(err) == CodeNotFound {
		return Token{}, errUnauthorized("the session ended or is not known: sign in again")
	}
	if err != nil {
		return Token{}, fmt.Errorf("authenticate session: %w", err)
	}
	if t.RevokedAt != nil {
		return Token{}, errUnauthorized("the session's token was revoked")
	}
	s.access.touch(ctx, t.ID)
	return t, nil
}

// SignOut ends a session.
func (s *Sessions) SignOut(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	return s.store.DeleteSession(ctx, HashToken(id))
}
