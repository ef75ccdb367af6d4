package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/prchat/prchat/chat"
)

// The gorm models: one per table, mapped to and from the chat types. They
// never leave the package.

type repositoryRow struct {
	ID        int64  `gorm:"column:id;primaryKey"`
	Name      string `gorm:"column:name"`
	ClonePath string `gorm:"column:clone_path"`
	CloneURL  string `gorm:"column:clone_url"`
	// ForgeProject is "" when the forge's project is Name.
	ForgeProject string    `gorm:"column:forge_project"`
	CreatedAt    time.Time `gorm:"column:created_at"`
}

func (repositoryRow) TableName() string { return "repositories" }

func (r repositoryRow) chat() chat.Repository {
	return chat.Repository{
		ID:           r.ID,
		Name:         r.Name,
		ClonePath:    r.ClonePath,
		CloneURL:     r.CloneURL,
		ForgeProject: r.ForgeProject,
		CreatedAt:    r.CreatedAt.UTC(),
	}
}

type reviewRow struct {
	ID           int64     `gorm:"column:id;primaryKey"`
	RepositoryID int64     `gorm:"column:repository_id"`
	PR           int       `gorm:"column:pr"`
	Version      int       `gorm:"column:version"`
	HeadSHA      string    `gorm:"column:head_sha"`
	BaseSHA      string    `gorm:"column:base_sha"`
	Backend      string    `gorm:"column:backend"`
	Model        string    `gorm:"column:model"`
	SessionID    string    `gorm:"column:session_id"`
	SessionHost  string    `gorm:"column:session_host"`
	RunDir       string    `gorm:"column:run_dir"`
	Markdown     string    `gorm:"column:markdown"`
	Sections     *string   `gorm:"column:sections"` // JSON []chat.Section
	CreatedAt    time.Time `gorm:"column:created_at"`
}

func (reviewRow) TableName() string { return "reviews" }

func newReviewRow(r *chat.Review) (reviewRow, error) {
	row := reviewRow{
		ID:           r.ID,
		RepositoryID: r.RepositoryID,
		PR:           r.PR,
		Version:      r.Version,
		HeadSHA:      r.HeadSHA,
		BaseSHA:      r.BaseSHA,
		Backend:      r.Backend,
		Model:        r.Model,
		SessionID:    r.SessionID,
		SessionHost:  r.SessionHost,
		RunDir:       r.RunDir,
		Markdown:     r.Markdown,
		CreatedAt:    r.CreatedAt,
	}
	if len(r.Sections) > 0 {
		s, err := encodeJSON(r.Sections)
		if err != nil {
			return reviewRow{}, fmt.Errorf("encode review sections: %w", err)
		}
		row.Sections = &s
	}
	return row, nil
}

// reviewWithRepo is a review joined with its repository's name.
type reviewWithRepo struct {
	Review     reviewRow `gorm:"embedded"`
	Repository string    `gorm:"column:repository"`
}

func (rr reviewWithRepo) chat() (chat.Review, error) {
	r := rr.Review
	rv := chat.Review{
		ID:           r.ID,
		RepositoryID: r.RepositoryID,
		Repository:   rr.Repository,
		PR:           r.PR,
		Version:      r.Version,
		HeadSHA:      r.HeadSHA,
		BaseSHA:      r.BaseSHA,
		Backend:      r.Backend,
		Model:        r.Model,
		SessionID:    r.SessionID,
		SessionHost:  r.SessionHost,
		RunDir:       r.RunDir,
		Markdown:     r.Markdown,
		CreatedAt:    r.CreatedAt.UTC(),
	}
	if err := decodeJSON(r.Sections, &rv.Sections); err != nil {
		return chat.Review{}, fmt.Errorf("decode sections of review %d: %w", r.ID, err)
	}
	return rv, nil
}

type conversationRow struct {
	ID           string    `gorm:"column:id;primaryKey"`
	ReviewID     int64     `gorm:"column:review_id"`
	Title        string    `gorm:"column:title"`
	Backend      string    `gorm:"column:backend"`
	Model        string    `gorm:"column:model"`
	Session      string    `gorm:"column:session"`
	SeededReason string    `gorm:"column:seeded_reason"`
	SessionID    string    `gorm:"column:session_id"`
	SessionHost  string    `gorm:"column:session_host"`
	RunDir       string    `gorm:"column:run_dir"`
	CreatedAt    time.Time `gorm:"column:created_at"`
	UpdatedAt    time.Time `gorm:"column:updated_at"`
}

func (conversationRow) TableName() string { return "conversations" }

func newConversationRow(c *chat.Conversation) conversationRow {
	return conversationRow{
		ID:           c.ID,
		ReviewID:     c.ReviewID,
		Title:        c.Title,
		Backend:      c.Backend,
		Model:        c.Model,
		Session:      string(c.Session),
		SeededReason: c.SeededReason,
		SessionID:    c.SessionID,
		SessionHost:  c.SessionHost,
		RunDir:       c.RunDir,
		CreatedAt:    c.CreatedAt,
		UpdatedAt:    c.UpdatedAt,
	}
}

// conversationWithReview is a conversation joined with what it is about.
type conversationWithReview struct {
	Conversation  conversationRow `gorm:"embedded"`
	Repository    string          `gorm:"column:repository"`
	PR            int             `gorm:"column:pr"`
	ReviewVersion int             `gorm:"column:review_version"`
}

func (cr conversationWithReview) chat() chat.Conversation {
	c := cr.Conversation
	return chat.Conversation{
		ID:            c.ID,
		ReviewID:      c.ReviewID,
		Repository:    cr.Repository,
		PR:            cr.PR,
		ReviewVersion: cr.ReviewVersion,
		Title:         c.Title,
		Backend:       c.Backend,
		Model:         c.Model,
		Session:       chat.SessionMode(c.Session),
		SeededReason:  c.SeededReason,
		SessionID:     c.SessionID,
		SessionHost:   c.SessionHost,
		RunDir:        c.RunDir,
		CreatedAt:     c.CreatedAt.UTC(),
		UpdatedAt:     c.UpdatedAt.UTC(),
	}
}

type turnRow struct {
	ID             string     `gorm:"column:id;primaryKey"`
	ConversationID string     `gorm:"column:conversation_id"`
	Number         int        `gorm:"column:number"`
	State          string     `gorm:"column:state"`
	Question       string     `gorm:"column:question"`
	Focus          *string    `gorm:"column:focus"`  // JSON chat.Focus
	Answer         *string    `gorm:"column:answer"` // JSON chat.Answer
	Note           string     `gorm:"column:note"`
	Reason         string     `gorm:"column:reason"`
	Provider       string     `gorm:"column:provider"`
	Queue          string     `gorm:"column:queue"`
	Runner         string     `gorm:"column:runner"`
	Fence          int64      `gorm:"column:fence"`
	LastSeq        int64      `gorm:"column:last_seq"`
	Backend        string     `gorm:"column:backend"`
	Model          string     `gorm:"column:model"`
	Session        string     `gorm:"column:session"`
	InputTokens    int64      `gorm:"column:input_tokens"`
	OutputTokens   int64      `gorm:"column:output_tokens"`
	Calls          int        `gorm:"column:calls"`
	Repairs        int        `gorm:"column:repairs"`
	CostUSD        *float64   `gorm:"column:cost_usd"`
	CostReason     string     `gorm:"column:cost_reason"`
	CreatedAt      time.Time  `gorm:"column:created_at"`
	StartedAt      *time.Time `gorm:"column:started_at"`
	FinishedAt     *time.Time `gorm:"column:finished_at"`
}

func (turnRow) TableName() string { return "turns" }

func newTurnRow(t *chat.Turn) (turnRow, error) {
	row := turnRow{
		ID:             t.ID,
		ConversationID: t.ConversationID,
		Number:         t.Number,
		State:          string(t.State),
		Question:       t.Question,
		Note:           t.Note,
		Reason:         string(t.Reason),
		Provider:       t.Provider,
		Queue:          t.Queue,
		Runner:         t.Runner,
		Fence:          t.Fence,
		LastSeq:        t.LastSeq,
		Backend:        t.Backend,
		Model:          t.Model,
		Session:        string(t.Session),
		InputTokens:    t.Usage.InputTokens,
		OutputTokens:   t.Usage.OutputTokens,
		Calls:          t.Usage.Calls,
		Repairs:        t.Usage.Repairs,
		CostUSD:        t.Usage.CostUSD,
		CostReason:     t.Usage.CostReason,
		CreatedAt:      t.CreatedAt,
		StartedAt:      t.StartedAt,
		FinishedAt:     t.FinishedAt,
	}
	var err error
	if row.Focus, err = encodeNullableJSON(t.Focus); err != nil {
		return turnRow{}, fmt.Errorf("encode focus: %w", err)
	}
	if row.Answer, err = encodeNullableJSON(t.Answer); err != nil {
		return turnRow{}, fmt.Errorf("encode answer: %w", err)
	}
	return row, nil
}

func (r turnRow) chat() (chat.Turn, error) {
	t := chat.Turn{
		ID:             r.ID,
		ConversationID: r.ConversationID,
		Number:         r.Number,
		State:          chat.State(r.State),
		Question:       r.Question,
		Note:           r.Note,
		Reason:         chat.Reason(r.Reason),
		Backend:        r.Backend,
		Model:          r.Model,
		Session:        chat.SessionMode(r.Session),
		Usage: chat.Usage{
			InputTokens:  r.InputTokens,
			OutputTokens: r.OutputTokens,
			Calls:        r.Calls,
			Repairs:      r.Repairs,
			CostUSD:      r.CostUSD,
			CostReason:   r.CostReason,
		},
		CreatedAt:  r.CreatedAt.UTC(),
		StartedAt:  utcPtr(r.StartedAt),
		FinishedAt: utcPtr(r.FinishedAt),
		Provider:   r.Provider,
		Queue:      r.Queue,
		Runner:     r.Runner,
		Fence:      r.Fence,
		LastSeq:    r.LastSeq,
	}
	if r.Focus != nil {
		t.Focus = new(chat.Focus)
		if err := decodeJSON(r.Focus, t.Focus); err != nil {
			return chat.Turn{}, fmt.Errorf("decode focus of turn %s: %w", r.ID, err)
		}
	}
	if r.Answer != nil {
		t.Answer = new(chat.Answer)
		if err := decodeJSON(r.Answer, t.Answer); err != nil {
			return chat.Turn{}, fmt.Errorf("decode answer of turn %s: %w", r.ID, err)
		}
	}
	return t, nil
}

func turnsFromRows(rows []turnRow) ([]chat.Turn, error) {
	turns := make([]chat.Turn, len(rows))
	for i, r := range rows {
		t, err := r.chat()
		if err != nil {
			return nil, err
		}
		turns[i] = t
	}
	return turns, nil
}

type turnEventRow struct {
	TurnID    string    `gorm:"column:turn_id;primaryKey"`
	Seq       int64     `gorm:"column:seq;primaryKey;autoIncrement:false"`
	Type      string    `gorm:"column:type"`
	Data      string    `gorm:"column:data"` // JSON chat.Event
	CreatedAt time.Time `gorm:"column:created_at"`
}

func (turnEventRow) TableName() string { return "turn_events" }

func newTurnEventRows(turnID string, events []chat.Event, at time.Time) ([]turnEventRow, int64, error) {
	rows := make([]turnEventRow, len(events))
	var maxSeq int64
	for i, e := range events {
		if e.Seq <= 0 {
			return nil, 0, fmt.Errorf("event %d (%s) has seq %d, want > 0", i, e.Type, e.Seq)
		}
		data, err := e.JSON()
		if err != nil {
			return nil, 0, fmt.Errorf("encode event %d: %w", e.Seq, err)
		}
		created := at
		if !e.At.IsZero() {
			created = e.At.UTC().Truncate(time.Microsecond)
		}
		rows[i] = turnEventRow{TurnID: turnID, Seq: e.Seq, Type: e.Type, Data: string(data), CreatedAt: created}
		maxSeq = max(maxSeq, e.Seq)
	}
	return rows, maxSeq, nil
}

func encodeJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// encodeNullableJSON encodes *v, or returns nil (NULL) when v is nil.
func encodeNullableJSON[T any](v *T) (*string, error) {
	if v == nil {
		return nil, nil
	}
	s, err := encodeJSON(v)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// decodeJSON decodes s into v, leaving v alone when s is NULL.
func decodeJSON(s *string, v any) error {
	if s == nil {
		return nil
	}
	return json.Unmarshal([]byte(*s), v)
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
