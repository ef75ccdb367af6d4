package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/prchat/prchat/chat"
)

var _ chat.TokenStore = (*Store)(nil)

type tokenRow struct {
	ID         string `gorm:"primaryKey"`
	Name       string
	Scope      string
	Repos      string
	Hash       []byte
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

func (tokenRow) TableName() string { return "api_tokens" }

func (r tokenRow) chat() chat.Token {
	t := chat.Token{ID: r.ID, Name: r.Name, Scope: chat.Scope(r.Scope), CreatedAt: r.CreatedAt.UTC(), Repos: []string{}}
	_ = json.Unmarshal([]byte(r.Repos), &t.Repos)
	if r.LastUsedAt != nil {
		u := r.LastUsedAt.UTC()
		t.LastUsedAt = &u
	}
	if r.RevokedAt != nil {
		u := r.RevokedAt.UTC()
		t.RevokedAt = &u
	}
	return t
}

// CreateToken stores t with the hash of its value and fills t's ID and
// CreatedAt.
func (s *Store) CreateToken(ctx context.Context, t *chat.Token, hash []byte) error {
	repos := t.Repos
	if repos == nil {
		repos = []string{}
	}
	b, err := json.Marshal(repos)
	if err != nil {
		return fmt.Errorf("create token %s: %w", t.Name, err)
	}
	row := tokenRow{ID: uuid.NewString(), Name: t.Name, Scope: string(t.Scope), Repos: string(b), Hash: hash, CreatedAt: now()}
	if err := s.write.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("create token %s: %w", t.Name, err)
	}
	*t = row.chat()
	return nil
}

// TokenByHash returns the token whose value hashes to hash, with the
// stored hash.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (chat.Token, []byte, error) {
	var row tokenRow
	err := s.read.WithContext(ctx).Where("hash = ?", hash).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return chat.Token{}, nil, chat.Errorf(chat.CodeNotFound, "no such token")
	}
	if err != nil {
		return chat.Token{}, nil, fmt.Errorf("look up token: %w", err)
	}
	return row.chat(), row.Hash, nil
}

// Tokens lists every token, revoked ones too, oldest first.
func (s *Store) Tokens(ctx context.Context) ([]chat.Token, error) {
	var rows []tokenRow
	if err := s.read.WithContext(ctx).Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out := make([]chat.Token, len(rows))
	for i, r := range rows {
		out[i] = r.chat()
	}
	return out, nil
}

// RevokeToken marks a token revoked at at, unless it already was, and
// returns it.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) (chat.Token, error) {
	if _, err := uuid.Parse(id); err != nil {
		return chat.Token{}, chat.Errorf(chat.CodeNotFound, "token %s not found", id)
	}
	db := s.write.WithContext(ctx)
	if err := db.Model(&tokenRow{}).Where("id = ? AND revoked_at IS NULL", id).Update("revoked_at", at).Error; err != nil {
		return chat.Token{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	var row tokenRow
	err := db.Where("id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return chat.Token{}, chat.Errorf(chat.CodeNotFound, "token %s not found", id)
	}
	if err != nil {
		return chat.Token{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	return row.chat(), nil
}

// TouchToken records that a token was used at at.
func (s *Store) TouchToken(ctx context.Context, id string, at time.Time) error {
	if err := s.write.WithContext(ctx).Model(&tokenRow{}).Where("id = ?", id).Update("last_used_at", at).Error; err != nil {
		return fmt.Errorf("touch token %s: %w", id, err)
	}
	return nil
}

// CountTokens counts the tokens ever made, revoked ones too.
func (s *Store) CountTokens(ctx context.Context) (int64, error) {
	var n int64
	if err := s.read.WithContext(ctx).Model(&tokenRow{}).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("count tokens: %w", err)
	}
	return n, nil
}
