package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/prchat/prchat/chat"
)

var _ chat.SessionFileStore = (*Store)(nil)

// sessionFileRow is a row of session_files: the sealed session file of a
// review or of a conversation (one of the two).
type sessionFileRow struct {
	ID             int64
	ReviewID       *int64
	ConversationID *string
	Backend        string
	SessionID      string
	Cwd            string
	Sealed         []byte
	Size           int64
	Digest         string
	UpdatedAt      time.Time
}

func (sessionFileRow) TableName() string { return "session_files" }

func (r sessionFileRow) chat() chat.SealedSessionFile {
	f := chat.SealedSessionFile{
		Backend: r.Backend, SessionID: r.SessionID, Cwd: r.Cwd,
		Sealed: r.Sealed, Size: r.Size, Digest: r.Digest, UpdatedAt: r.UpdatedAt,
	}
	if r.ReviewID != nil {
		f.Owner.ReviewID = *r.ReviewID
	}
	if r.ConversationID != nil {
		f.Owner.ConversationID = *r.ConversationID
	}
	return f
}

// upsertSessionFile is the statement that stores a session file for one
// kind of owner (its column), replacing the file stored before; its values
// are those of sessionFileArgs.
func upsertSessionFile(column string) string {
	return `INSERT INTO session_files (` + column + `, backend, session_id, cwd, sealed, size, digest, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (` + column + `) WHERE ` + column + ` IS NOT NULL DO UPDATE SET
    backend = excluded.backend, session_id = excluded.session_id, cwd = excluded.cwd,
    sealed = excluded.sealed, size = excluded.size, digest = excluded.digest, updated_at = excluded.updated_at`
}

func sessionFileArgs(owner any, f chat.SealedSessionFile, at time.Time) []any {
	return []any{owner, f.Backend, f.SessionID, f.Cwd, f.Sealed, f.Size, f.Digest, at}
}

// PutReviewSessionFile stores f as the session file of review
// f.Owner.ReviewID, replacing the one before, unless the review has a
// conversation (CodeConflict). A review that is not there is CodeNoReview.
func (s *Store) PutReviewSessionFile(ctx context.Context, f chat.SealedSessionFile) error {
	id := f.Owner.ReviewID
	if id == 0 || f.Owner.ConversationID != "" {
		return fmt.Errorf("store the session file of %s: not a review", f.Owner)
	}
	if _, err := s.ReviewByID(ctx, id); err != nil {
		return err
	}
	errConflict := chat.Errorf(chat.CodeConflict, "the review already has conversations; its session can no longer be replaced")
	err := s.transaction(ctx, func(tx *gorm.DB) error {
		var convs []string
		if err := tx.Raw(`SELECT id FROM conversations WHERE review_id = ? LIMIT 1`, id).Scan(&convs).Error; err != nil {
			return err
		}
		if len(convs) > 0 {
			return errConflict
		}
		return tx.Exec(upsertSessionFile("review_id"), sessionFileArgs(id, f, now())...).Error
	})
	switch {
	case err == errConflict:
		return err
	case err != nil:
		return fmt.Errorf("store the session file of review %d: %w", id, err)
	}
	return nil
}

// SessionFile returns the session file stored for owner, or CodeNotFound.
func (s *Store) SessionFile(ctx context.Context, owner chat.SessionOwner) (chat.SealedSessionFile, error) {
	q := s.read.WithContext(ctx)
	if owner.ConversationID != "" {
		q = q.Where("conversation_id = ?", owner.ConversationID)
	} else {
		q = q.Where("review_id = ?", owner.ReviewID)
	}
	var rows []sessionFileRow
	if err := q.Limit(1).Find(&rows).Error; err != nil {
		return chat.SealedSessionFile{}, fmt.Errorf("read the session file of %s: %w", owner, err)
	}
	if len(rows) == 0 {
		return chat.SealedSessionFile{}, chat.Errorf(chat.CodeNotFound, "%s has no stored session file", owner)
	}
	return rows[0].chat(), nil
}

// putConversationSessionFile stores f as the session file of conversation
// conv in tx (FinishTurn's fenced transaction), replacing the one before.
func putConversationSessionFile(tx *gorm.DB, conv string, f chat.SealedSessionFile, at time.Time) error {
	return tx.Exec(upsertSessionFile("conversation_id"), sessionFileArgs(conv, f, at)...).Error
}
