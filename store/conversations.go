package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/prchat/prchat/chat"
)

// maxTurnNumberAttempts bounds AddTurn's retries when a concurrent AddTurn
// took the number it computed.
const maxTurnNumberAttempts = 10

// newQueuedTurn returns t as a conversation's new queued turn: a fresh id
// unless t has one, no run yet, created now unless t says when.
func newQueuedTurn(t *chat.Turn, conversationID string) chat.Turn {
	nt := *t
	nt.ID = cmp.Or(nt.ID, uuid.NewString())
	nt.ConversationID = conversationID
	nt.State = chat.StateQueued
	nt.Runner, nt.Fence, nt.LastSeq = "", 0, 0
	nt.CreatedAt = stamp(nt.CreatedAt)
	nt.StartedAt, nt.FinishedAt = nil, nil
	return nt
}

// insertTurn inserts t in tx, reporting the busy rule as CodeBusy.
func insertTurn(tx *gorm.DB, t *chat.Turn) error {
	row, err := newTurnRow(t)
	if err != nil {
		return err
	}
	err = tx.Create(&row).Error
	if violates(err, busyKey()) {
		return chat.Errorf(chat.CodeBusy, "conversation %s already has a question pending", t.ConversationID)
	}
	return err
}

// AddTurn inserts t as the next turn (state queued) of conversation
// t.ConversationID and fills its id, number and times. A conversation with a
// queued or running turn refuses it with CodeBusy; a missing one is
// CodeNotFound.
func (s *Store) AddTurn(ctx context.Context, t *chat.Turn) error {
	nt := newQueuedTurn(t, t.ConversationID)
	var err error
	for attempt := 1; ; attempt++ {
		err = s.transaction(ctx, func(tx *gorm.DB) error {
			var next []int
			if err := tx.Raw(`SELECT COALESCE((SELECT MAX(number) FROM turns WHERE conversation_id = c.id), 0) + 1
FROM conversations c WHERE c.id = ?`, nt.ConversationID).Scan(&next).Error; err != nil {
				return err
			}
			if len(next) == 0 {
				return chat.Errorf(chat.CodeNotFound, "conversation %s not found", nt.ConversationID)
			}
			nt.Number = next[0]
			// The turn goes in before the conversation is touched, the order
			// in which FinishTurn and SettleTurn lock them.
			if err := insertTurn(tx, &nt); err != nil {
				return err
			}
			return tx.Exec(`UPDATE conversations SET updated_at = ? WHERE id = ?`, nt.CreatedAt, nt.ConversationID).Error
		})
		// Another AddTurn took the number; its turn is pending, so the retry
		// will most likely find the conversation busy.
		if violates(err, turnNumberKey()) && attempt < maxTurnNumberAttempts {
			continue
		}
		break
	}
	if violatesForeignKey(err) {
		return chat.Errorf(chat.CodeNotFound, "conversation %s not found", nt.ConversationID)
	}
	if err != nil {
		var e *chat.Error
		if errors.As(err, &e) {
			return e
		}
		return fmt.Errorf("add turn to conversation %s: %w", nt.ConversationID, err)
	}
	*t = nt
	return nil
}

// selectConversations selects conversations with what they are about.
const selectConversations = `SELECT c.*, rp.name AS repository, rv.pr AS pr, rv.version AS review_version
FROM conversations c
JOIN reviews rv ON rv.id = c.review_id
JOIN repositories rp ON rp.id = rv.repository_id `

// ConversationHead returns a conversation without its turns.
func (s *Store) ConversationHead(ctx context.Context, id string) (chat.Conversation, error) {
	var rows []conversationWithReview
	if err := s.read.WithContext(ctx).Raw(selectConversations+`WHERE c.id = ?`, id).Find(&rows).Error; err != nil {
		return chat.Conversation{}, fmt.Errorf("get conversation %s: %w", id, err)
	}
	if len(rows) == 0 {
		return chat.Conversation{}, chat.Errorf(chat.CodeNotFound, "conversation %s not found", id)
	}
	return rows[0].chat(), nil
}

// Conversation returns a conversation with all its turns, in order.
func (s *Store) Conversation(ctx context.Context, id string) (chat.Conversation, error) {
	c, err := s.ConversationHead(ctx, id)
	if err != nil {
		return c, err
	}
	db := s.read.WithContext(ctx)
	var turns []turnRow
	if err := db.Where("conversation_id = ?", id).Order("number").Find(&turns).Error; err != nil {
		return chat.Conversation{}, fmt.Errorf("get turns of conversation %s: %w", id, err)
	}
	if c.Turns, err = turnsFromRows(turns); err != nil {
		return chat.Conversation{}, err
	}
	return c, nil
}

// Conversations lists a PR's conversations about any of its review versions,
// newest first, without turns. An unknown repository is
// CodeRepositoryNotFound.
func (s *Store) Conversations(ctx context.Context, repo string, pr int) ([]chat.Conversation, error) {
	var rows []conversationWithReview
	if err := s.read.WithContext(ctx).Raw(selectConversations+`WHERE rp.name = ? AND rv.pr = ?
ORDER BY c.created_at DESC, c.id DESC`, repo, pr).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list conversations of %s#%d: %w", repo, pr, err)
	}
	if len(rows) == 0 {
		if _, err := s.Repository(ctx, repo); err != nil {
			return nil, err
		}
	}
	convs := make([]chat.Conversation, len(rows))
	for i, r := range rows {
		convs[i] = r.chat()
	}
	return convs, nil
}

// DeleteConversation deletes a conversation with its turns and events.
func (s *Store) DeleteConversation(ctx context.Context, id string) error {
	var deleted int64
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		// Turns first (their events cascade), then the conversation: the
		// order in which FinishTurn and SettleTurn lock them.
		if err := tx.Exec(`DELETE FROM turns WHERE conversation_id = ?`, id).Error; err != nil {
			return err
		}
		res := tx.Exec(`DELETE FROM conversations WHERE id = ?`, id)
		deleted = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return fmt.Errorf("delete conversation %s: %w", id, err)
	}
	if deleted == 0 {
		return chat.Errorf(chat.CodeNotFound, "conversation %s not found", id)
	}
	return nil
}
