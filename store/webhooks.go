package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/prchat/prchat/chat"
)

var _ chat.CommentStore = (*Store)(nil)

// webhookCommentRow is a question received from a PR comment, with the
// turn it became and the state of its reply.
type webhookCommentRow struct {
	ID             string    `gorm:"column:id;primaryKey"`
	Forge          string    `gorm:"column:forge"`
	DeliveryID     string    `gorm:"column:delivery_id"`
	Repository     string    `gorm:"column:repository"`
	ForgeProject   string    `gorm:"column:forge_project"`
	PR             int       `gorm:"column:pr"`
	CommentID      int64     `gorm:"column:comment_id"`
	Thread         string    `gorm:"column:thread"`
	Discussion     string    `gorm:"column:discussion"`
	Question       string    `gorm:"column:question"`
	Focus          *string   `gorm:"column:focus"` // JSON chat.Focus
	CloneURL       string    `gorm:"column:clone_url"`
	HTMLURL        string    `gorm:"column:html_url"`
	Installation   int64     `gorm:"column:installation"`
	HeadSHA        string    `gorm:"column:head_sha"`
	BaseSHA        string    `gorm:"column:base_sha"`
	TurnID         string    `gorm:"column:turn_id"`
	ConversationID string    `gorm:"column:conversation_id"`
	TurnNumber     int       `gorm:"column:turn_number"`
	State          string    `gorm:"column:state"`
	Reacted        bool      `gorm:"column:reacted"`
	PostTried      bool      `gorm:"column:post_tried"`
	ReplyID        string    `gorm:"column:reply_id"`
	Attempts       int       `gorm:"column:attempts"`
	NextAttemptAt  time.Time `gorm:"column:next_attempt_at"`
	Error          string    `gorm:"column:error"`
	Refusal        string    `gorm:"column:refusal"`
	Version        int64     `gorm:"column:version"`
	CreatedAt      time.Time `gorm:"column:created_at"`
	UpdatedAt      time.Time `gorm:"column:updated_at"`
}

func (webhookCommentRow) TableName() string { return "webhook_comments" }

func (r webhookCommentRow) chat() (chat.WebhookComment, error) {
	c := chat.WebhookComment{
		Comment: chat.Comment{
			Forge:        r.Forge,
			DeliveryID:   r.DeliveryID,
			Repository:   r.Repository,
			ForgeProject: r.ForgeProject,
			CloneURL:     r.CloneURL,
			HTMLURL:      r.HTMLURL,
			PR:           r.PR,
			CommentID:    r.CommentID,
			Question:     r.Question,
			Thread:       r.Thread,
			Discussion:   r.Discussion,
			Installation: r.Installation,
			HeadSHA:      r.HeadSHA,
			BaseSHA:      r.BaseSHA,
		},
		ID:             r.ID,
		TurnID:         r.TurnID,
		ConversationID: r.ConversationID,
		TurnNumber:     r.TurnNumber,
		State:          r.State,
		Reacted:        r.Reacted,
		PostTried:      r.PostTried,
		ReplyID:        r.ReplyID,
		Attempts:       r.Attempts,
		NextAttempt:    r.NextAttemptAt.UTC(),
		Error:          r.Error,
		Refusal:        r.Refusal,
		Version:        r.Version,
		CreatedAt:      r.CreatedAt.UTC(),
	}
	if r.Focus != nil {
		c.Focus = new(chat.Focus)
		if err := decodeJSON(r.Focus, c.Focus); err != nil {
			return chat.WebhookComment{}, fmt.Errorf("decode the focus of webhook comment %s: %w", r.ID, err)
		}
	}
	return c, nil
}

type webhookThreadRow struct {
	Forge          string    `gorm:"column:forge;primaryKey"`
	Repository     string    `gorm:"column:repository;primaryKey"`
	PR             int       `gorm:"column:pr;primaryKey"`
	Thread         string    `gorm:"column:thread;primaryKey"`
	ConversationID string    `gorm:"column:conversation_id"`
	CreatedAt      time.Time `gorm:"column:created_at"`
}

func (webhookThreadRow) TableName() string { return "webhook_threads" }

func webhookDeliveryKey() uniqueKey {
	return uniqueKey{"webhook_comments_delivery_key", []string{"webhook_comments.forge", "webhook_comments.delivery_id"}}
}

func webhookCommentKey() uniqueKey {
	return uniqueKey{"webhook_comments_comment_key", []string{"webhook_comments.forge", "webhook_comments.repository", "webhook_comments.comment_id"}}
}

// AddComment stores a received comment question. A delivery id or a
// comment stored before is chat.ErrDuplicate; a comment whose notice
// (c.Notice) its PR has had is chat.ErrNoticed; nothing is stored then.
func (s *Store) AddComment(ctx context.Context, c *chat.WebhookComment) error {
	t := now()
	row := webhookCommentRow{
		ID:            uuid.NewString(),
		Forge:         c.Forge,
		DeliveryID:    c.DeliveryID,
		Repository:    c.Repository,
		ForgeProject:  c.ForgeProject,
		PR:            c.PR,
		CommentID:     c.CommentID,
		Thread:        c.Thread,
		Discussion:    c.Discussion,
		Question:      c.Question,
		CloneURL:      c.CloneURL,
		HTMLURL:       c.HTMLURL,
		Installation:  c.Installation,
		HeadSHA:       c.HeadSHA,
		BaseSHA:       c.BaseSHA,
		TurnID:        c.TurnID,
		State:         chat.CommentReceived,
		Refusal:       c.Refusal,
		NextAttemptAt: stamp(c.NextAttempt),
		Version:       1,
		CreatedAt:     t,
		UpdatedAt:     t,
	}
	var err error
	if row.Focus, err = encodeNullableJSON(c.Focus); err != nil {
		return fmt.Errorf("encode the focus of a webhook comment: %w", err)
	}
	if c.Notice == "" {
		err = s.write.WithContext(ctx).Create(&row).Error
	} else {
		// The notice and the comment are stored together or not at all.
		err = s.transaction(ctx, func(tx *gorm.DB) error {
			n := webhookNoticeRow{Forge: c.Forge, Repository: c.Repository, PR: c.PR, Kind: c.Notice, CreatedAt: t}
			res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&n)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				return chat.ErrNoticed
			}
			return tx.Create(&row).Error
		})
		if errors.Is(err, chat.ErrNoticed) {
			return err
		}
	}
	if violates(err, webhookDeliveryKey()) || violates(err, webhookCommentKey()) {
		return chat.ErrDuplicate
	}
	if err != nil {
		return fmt.Errorf("store webhook comment %s/%d: %w", c.Repository, c.CommentID, err)
	}
	c.ID, c.Version, c.State, c.CreatedAt = row.ID, row.Version, row.State, t
	return nil
}

// UpdateComment stores c's processing fields if c.Version is the stored
// version, and bumps it; else chat.ErrFenced.
func (s *Store) UpdateComment(ctx context.Context, c *chat.WebhookComment) error {
	res := s.write.WithContext(ctx).Model(&webhookCommentRow{}).
		Where("id = ? AND version = ?", c.ID, c.Version).
		Updates(map[string]any{
			"conversation_id": c.ConversationID,
			"turn_number":     c.TurnNumber,
			"state":           c.State,
			"reacted":         c.Reacted,
			"post_tried":      c.PostTried,
			"reply_id":        c.ReplyID,
			"attempts":        c.Attempts,
			"next_attempt_at": stamp(c.NextAttempt),
			"error":           c.Error,
			"refusal":         c.Refusal,
			"version":         c.Version + 1,
			"updated_at":      now(),
		})
	if res.Error != nil {
		return fmt.Errorf("update webhook comment %s: %w", c.ID, res.Error)
	}
	if res.RowsAffected == 0 {
		return chat.ErrFenced
	}
	c.Version++
	return nil
}

// DueComments lists comments still to work on whose next attempt is due.
func (s *Store) DueComments(ctx context.Context, at time.Time, limit int) ([]chat.WebhookComment, error) {
	var rows []webhookCommentRow
	err := s.read.WithContext(ctx).
		Where("state IN ? AND next_attempt_at <= ?", []string{chat.CommentReceived, chat.CommentWaiting, chat.CommentQueued}, stamp(at)).
		Order("next_attempt_at, created_at").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list due webhook comments: %w", err)
	}
	out := make([]chat.WebhookComment, 0, len(rows))
	for _, r := range rows {
		c, err := r.chat()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// ClaimThread returns the conversation of a thread, giving conversationID
// to a thread that has none.
func (s *Store) ClaimThread(ctx context.Context, forge, repo string, pr int, thread, conversationID string) (string, error) {
	row := webhookThreadRow{Forge: forge, Repository: repo, PR: pr, Thread: thread, ConversationID: conversationID, CreatedAt: now()}
	db := s.write.WithContext(ctx)
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
		return "", fmt.Errorf("claim thread %s of %s#%d: %w", thread, repo, pr, err)
	}
	var got []webhookThreadRow
	if err := db.Where("forge = ? AND repository = ? AND pr = ? AND thread = ?", forge, repo, pr, thread).Find(&got).Error; err != nil {
		return "", fmt.Errorf("read thread %s of %s#%d: %w", thread, repo, pr, err)
	}
	if len(got) == 0 {
		return "", fmt.Errorf("thread %s of %s#%d: not stored", thread, repo, pr)
	}
	return got[0].ConversationID, nil
}

// webhookNoticeRow is a notice a PR has had: one said once per PR (a
// question from an unregistered repository's PR).
type webhookNoticeRow struct {
	Forge      string    `gorm:"column:forge;primaryKey"`
	Repository string    `gorm:"column:repository;primaryKey"`
	PR         int       `gorm:"column:pr;primaryKey"`
	Kind       string    `gorm:"column:kind;primaryKey"`
	CreatedAt  time.Time `gorm:"column:created_at"`
}

func (webhookNoticeRow) TableName() string { return "webhook_notices" }
