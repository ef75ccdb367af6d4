package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/prchat/prchat/chat"
)

var _ chat.SessionStore = (*Store)(nil)

type sessionRow struct {
	Hash      []byte `gorm:"primaryKey"`
	TokenID   string
	CreatedAt time.Time
	ExpiresAt time.Time
}

func (sessionRow) TableName() string { return "dashboard_sessions" }

// CreateSession stores a dashboard session by the hash of its id, and
// removes the sessions that expired before createdAt.
func (s *Store) CreateSession(ctx context.Context, hash []byte, tokenID string, createdAt, expiresAt time.Time) error {
	db := s.write.WithContext(ctx)
	if err := db.Where("expires_at < ?", createdAt).Delete(&sessionRow{}).Error; err != nil {
		return fmt.Errorf("remove expired sessions: %w", err)
	}
	row := sessionRow{Hash: hash, TokenID: tokenID, CreatedAt: createdAt, ExpiresAt: expiresAt}
	if err := db.Create(&row).Error; err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// SessionToken returns the token of the session whose id hashes to hash,
// if the session has not expired at now; else an *Error with CodeNotFound.
func (s *Store) SessionToken(ctx context.Context, hash []byte, now time.Time) (chat.Token, error) {
	var row sessionRow
	err := s.read.WithContext(ctx).Where("hash = ? AND expires_at > ?", hash, now).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return chat.Token{}, chat.Errorf(chat.CodeNotFound, "no such session")
	}
	if err != nil {
		return chat.Token{}, fmt.Errorf("look up session: %w", err)
	}
	var tok tokenRow
	err = s.read.WithContext(ctx).Where("id = ?", row.TokenID).Take(&tok).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return chat.Token{}, chat.Errorf(chat.CodeNotFound, "no such session")
	}
	if err != nil {
		return chat.Token{}, fmt.Errorf("look up the session's token: %w", err)
	}
	return tok.chat(), nil
}

// DeleteSession removes the session whose id hashes to hash (none: no
// error).
func (s *Store) DeleteSession(ctx context.Context, hash []byte) error {
	if err := s.write.WithContext(ctx).Where("hash = ?", hash).Delete(&sessionRow{}).Error; err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}
