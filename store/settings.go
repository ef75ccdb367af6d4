package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/prchat/prchat/chat"
)

var _ chat.SettingsStore = (*Store)(nil)

// Names of the settings rows.
const (
	settingActiveProvider = "active_provider"
	settingActiveModel    = "active_model"
)

type settingRow struct {
	Name      string `gorm:"primaryKey"`
	Value     string
	UpdatedAt time.Time
}

func (settingRow) TableName() string { return "settings" }

type providerKeyRow struct {
	Provider  string `gorm:"primaryKey"`
	Sealed    []byte
	UpdatedAt time.Time
}

func (providerKeyRow) TableName() string { return "provider_keys" }

// ActiveProvider returns the stored active provider and model.
func (s *Store) ActiveProvider(ctx context.Context) (string, string, error) {
	var rows []settingRow
	if err := s.read.WithContext(ctx).Where("name IN ?", []string{settingActiveProvider, settingActiveModel}).Find(&rows).Error; err != nil {
		return "", "", fmt.Errorf("read the active provider: %w", err)
	}
	var provider, model string
	for _, r := range rows {
		switch r.Name {
		case settingActiveProvider:
			provider = r.Value
		case settingActiveModel:
			model = r.Value
		}
	}
	return provider, model, nil
}

// SetActiveProvider stores the active provider and model.
func (s *Store) SetActiveProvider(ctx context.Context, provider, model string) error {
	t := now()
	rows := []settingRow{{Name: settingActiveProvider, Value: provider, UpdatedAt: t}, {Name: settingActiveModel, Value: model, UpdatedAt: t}}
	err := s.write.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "name"}},
		DoUpdates: clause.AssignmentColumns([]string{"value", "updated_at"}),
	}).Create(&rows).Error
	if err != nil {
		return fmt.Errorf("set the active provider: %w", err)
	}
	return nil
}

// ProviderKeys returns the stored, encrypted keys by provider.
func (s *Store) ProviderKeys(ctx context.Context) (map[string][]byte, error) {
	var rows []providerKeyRow
	if err := s.read.WithContext(ctx).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read provider keys: %w", err)
	}
	out := make(map[string][]byte, len(rows))
	for _, r := range rows {
		out[r.Provider] = r.Sealed
	}
	return out, nil
}

// SetProviderKey stores a provider's encrypted key, replacing any other.
func (s *Store) SetProviderKey(ctx context.Context, provider string, sealed []byte) error {
	row := providerKeyRow{Provider: provider, Sealed: sealed, UpdatedAt: now()}
	err := s.write.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "provider"}},
		DoUpdates: clause.AssignmentColumns([]string{"sealed", "updated_at"}),
	}).Create(&row).Error
	if err != nil {
		return fmt.Errorf("store the key of %s: %w", provider, err)
	}
	return nil
}

// DeleteProviderKey removes a provider's stored key.
func (s *Store) DeleteProviderKey(ctx context.Context, provider string) (bool, error) {
	res := s.write.WithContext(ctx).Where("provider = ?", provider).Delete(&providerKeyRow{})
	if res.Error != nil {
		return false, fmt.Errorf("delete the key of %s: %w", provider, res.Error)
	}
	return res.RowsAffected > 0, nil
}

type agentSessionRow struct {
	ID        string `gorm:"primaryKey"`
	Backend   string
	History   string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (agentSessionRow) TableName() string { return "agent_sessions" }

// AgentSessions stores the message histories of one backend's sessions (the
// openai backend's), so that any worker can fork or resume them.
type AgentSessions struct {
	s       *Store
	backend string
}

// AgentSessions returns the session store of backend.
func (s *Store) AgentSessions(backend string) *AgentSessions {
	return &AgentSessions{s: s, backend: backend}
}

// Load returns a session's history, or an error wrapping
// chat.ErrSessionGone.
func (a *AgentSessions) Load(ctx context.Context, id string) (json.RawMessage, error) {
	var row agentSessionRow
	err := a.s.read.WithContext(ctx).Where("id = ? AND backend = ?", id, a.backend).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("session %s: %w", id, chat.ErrSessionGone)
	}
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	return json.RawMessage(row.History), nil
}

// Save stores a session's whole history.
func (a *AgentSessions) Save(ctx context.Context, id string, history json.RawMessage) error {
	t := now()
	row := agentSessionRow{ID: id, Backend: a.backend, History: string(history), CreatedAt: t, UpdatedAt: t}
	err := a.s.write.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "id"}},
		DoUpdates: clause.AssignmentColumns([]string{"history", "updated_at"}),
	}).Create(&row).Error
	if err != nil {
		return fmt.Errorf("save session %s: %w", id, err)
	}
	return nil
}

var _ chat.HistoryStore = (*Store)(nil)

// SaveHistory stores a session's whole history for backend.
func (s *Store) SaveHistory(ctx context.Context, backend, sessionID string, history json.RawMessage) error {
	return s.AgentSessions(backend).Save(ctx, sessionID, history)
}
