package chat

import (
	"encoding/json"
	"time"
)

// Backend names of the contract. A review with no agent has an empty backend.
const (
	BackendClaudeCode = "claude-code"
	BackendCodex      = "codex"
	BackendOpenAI     = "openai"
	BackendLocal      = "local"
)

// KnownBackends returns the backend names a review may record.
func KnownBackends() []string {
	return []string{BackendClaudeCode, BackendCodex, BackendOpenAI, BackendLocal}
}

// PrivateDir is the folder inside a run directory that holds prchat's own
// files (the saved review, earlier turns). Citations may not point into it.
const PrivateDir = ".prchat"

// Repository is a registered repository.
type Repository struct {
	ID        int64  `json:"-"`
	Name      string `json:"name"` // owner/repo
	ClonePath string `json:"clone_path,omitempty"`
	CloneURL  string `json:"clone_url,omitempty"`
	// ForgeProject is the repository's project on its forge when that is
	// not Name, such as a GitLab project in nested groups
	// (acme/platform/widgets): webhooks of that project are this
	// repository's, and the replies go to it.
	ForgeProject string    `json:"forge_project,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
}

// Review is one saved version of an agent's review of a pull request.
type Review struct {
	ID           int64     `json:"-"`
	RepositoryID int64     `json:"-"`
	Repository   string    `json:"repository"`
	PR           int       `json:"pr"`
	Version      int       `json:"version"`
	HeadSHA      string    `json:"head_sha"`
	BaseSHA      string    `json:"base_sha"`
	Backend      string    `json:"backend"`
	Model        string    `json:"model"`
	SessionID    string    `json:"session_id"`
	SessionHost  string    `json:"session_host"`
	RunDir       string    `json:"run_dir"`
	Markdown     string    `json:"markdown"`
	Sections     []Section `json:"sections"`
	CreatedAt    time.Time `json:"created_at"`
	// History, when recording a review of a backend whose sessions live in
	// the database (openai), is the session's message history; it is stored
	// as the session SessionID so that questions can fork it.
	History json.RawMessage `json:"-"`
}

// MarshalJSON writes r with session_cwd, the name of the directory its
// session ran in, beside run_dir, its older name.
func (r Review) MarshalJSON() ([]byte, error) {
	type plain Review
	return json.Marshal(struct {
		plain
		SessionCwd string `json:"session_cwd"`
	}{plain(r), r.RunDir})
}

// Section is one structured part of a review (a finding, a stop on a tour).
type Section struct {
	ID       string   `json:"id"`
	Title    string   `json:"title,omitempty"`
	Markdown string   `json:"markdown,omitempty"`
	Anchors  []Anchor `json:"anchors,omitempty"`
}

// Anchor points at lines of a file: at the PR head, or at its base for
// lines the PR removed (Side SideBase). Zero lines mean the whole file.
type Anchor struct {
	Path      string `json:"path"`
	StartLine int    `json:"start_line,omitempty"`
	EndLine   int    `json:"end_line,omitempty"`
	// Side is SideHead (the default, also when empty) or SideBase.
	Side string `json:"side,omitempty"`
}

// Anchor sides: the commit an anchor's lines are in.
const (
	// SideHead: lines of the PR's head commit (the checkout).
	SideHead = "head"
	// SideBase: lines of the PR's base commit, such as lines the PR
	// removed.
	SideBase = "base"
)

// Focus says what part of the review a question is about.
type Focus struct {
	Kind    string   `json:"kind"`         // section | stop | overview
	ID      string   `json:"id,omitempty"` // the section or stop id
	Anchors []Anchor `json:"anchors,omitempty"`
}

// Focus kinds.
const (
	FocusSection  = "section"
	FocusStop     = "stop"
	FocusOverview = "overview"
)

// SessionMode is how the agent session of a turn started.
type SessionMode string

// Session modes.
const (
	SessionForked  SessionMode = "forked"
	SessionResumed SessionMode = "resumed"
	SessionSeeded  SessionMode = "seeded"
	SessionNone    SessionMode = "none"
)

// Conversation is a thread of turns about one review version.
type Conversation struct {
	ID            string      `json:"id"`
	ReviewID      int64       `json:"-"`
	Repository    string      `json:"repository"`
	PR            int         `json:"pr"`
	ReviewVersion int         `json:"review_version"`
	Title         string      `json:"title"`
	Backend       string      `json:"backend"`
	Model         string      `json:"model"`
	Session       SessionMode `json:"session"`
	SeededReason  string      `json:"seeded_reason"`
	SessionID     string      `json:"-"`
	SessionHost   string      `json:"-"`
	RunDir        string      `json:"-"`
	CreatedAt     time.Time   `json:"created_at"`
	UpdatedAt     time.Time   `json:"updated_at"`
	Turns         []Turn      `json:"turns,omitempty"`
}

// State is where a turn is in its life.
type State string

// Turn states.
const (
	StateQueued      State = "queued"
	StateRunning     State = "running"
	StateSucceeded   State = "succeeded"
	StateFailed      State = "failed"
	StateCancelled   State = "cancelled"
	StateInterrupted State = "interrupted"
)

// Final reports whether s is a state a turn never leaves.
func (s State) Final() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCancelled || s == StateInterrupted
}

// Reason is why a turn did not succeed.
type Reason string

// Failure reasons.
const (
	ReasonTimeout            Reason = "timeout"
	ReasonBudgetExceeded     Reason = "budget_exceeded"
	ReasonInvalidAnswer      Reason = "invalid_answer"
	ReasonBackendUnavailable Reason = "backend_unavailable"
	ReasonBackendError       Reason = "backend_error"
	ReasonNeedsClone         Reason = "needs_clone"
	ReasonCancelled          Reason = "cancelled"
	ReasonInterrupted        Reason = "interrupted"
)

// Turn is one question and its answer.
type Turn struct {
	ID             string      `json:"-"`
	ConversationID string      `json:"conversation_id"`
	Number         int         `json:"number"`
	State          State       `json:"state"`
	Question       string      `json:"question"`
	Focus          *Focus      `json:"focus"`
	Answer         *Answer     `json:"answer"`
	Note           string      `json:"note"`
	Reason         Reason      `json:"reason"`
	Backend        string      `json:"backend"`
	Model          string      `json:"model"`
	Session        SessionMode `json:"session"`
	Usage          Usage       `json:"usage"`
	CreatedAt      time.Time   `json:"created_at"`
	StartedAt      *time.Time  `json:"started_at"`
	FinishedAt     *time.Time  `json:"finished_at"`

	// Provider overrides the conversation's backend for this turn, if set.
	Provider string `json:"-"`
	// Queue is the host whose queue the turn's job went to ("" = shared).
	Queue string `json:"-"`
	// Runner is the worker run (worker id/instance) that holds the turn.
	Runner string `json:"-"`
	// Fence is the fencing token of the run that holds the turn.
	Fence int64 `json:"-"`
	// LastSeq is the sequence number of the turn's last stored event.
	LastSeq int64 `json:"-"`
}

// Usage counts what a turn cost.
type Usage struct {
	InputTokens  int64    `json:"input_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	Calls        int      `json:"calls"`
	Repairs      int      `json:"repairs"`
	CostUSD      *float64 `json:"cost_usd"`
	CostReason   string   `json:"cost_reason"`
}

// Add adds the counts of o to u. Known costs add up; once any part's cost is
// unknown (a reason with no figure), the sum is unknown with that reason.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.Calls += o.Calls
	u.Repairs += o.Repairs
	if u.CostReason != "" {
		return
	}
	if o.CostReason != "" && o.CostUSD == nil {
		u.CostUSD, u.CostReason = nil, o.CostReason
		return
	}
	if o.CostUSD != nil {
		c := *o.CostUSD
		if u.CostUSD != nil {
			c += *u.CostUSD
		}
		u.CostUSD = &c
	}
}

// Answer is what the agent must return, checked against AnswerSchema.
type Answer struct {
	AnswerMarkdown string     `json:"answer_markdown"`
	Citations      []Citation `json:"citations"`
	SuggestsFix    *Fix       `json:"suggests_fix"`
}

// Citation points at lines of a file at the PR head.
type Citation struct {
	Path      string `json:"path"`
	StartLine int    `json:"start_line"`
	EndLine   int    `json:"end_line"`
}

// Fix is a suggested change, in words.
type Fix struct {
	Summary string `json:"summary"`
}

// Event types of a turn's transcript and live stream.
const (
	EventState      = "state"
	EventTextDelta  = "text_delta"
	EventToolStart  = "tool_start"
	EventToolResult = "tool_result"
	EventUsage      = "usage"
	EventNote       = "note"
	EventDone       = "done"
	EventError      = "error"
)

// Event is one entry of a turn's transcript. Which fields are set depends on
// Type (see the SSE table of the contract).
type Event struct {
	Seq            int64           `json:"seq"`
	Type           string          `json:"type"`
	State          State           `json:"state,omitempty"`
	Text           string          `json:"text,omitempty"`
	ToolID         string          `json:"tool_id,omitempty"`
	ToolName       string          `json:"tool_name,omitempty"`
	Input          json.RawMessage `json:"input,omitempty"`
	Summary        string          `json:"summary,omitempty"`
	InputTokens    *int64          `json:"input_tokens,omitempty"`
	OutputTokens   *int64          `json:"output_tokens,omitempty"`
	CostUSD        *float64        `json:"cost_usd,omitempty"`
	ConversationID string          `json:"conversation_id,omitempty"`
	Turn           int             `json:"turn,omitempty"`
	Answer         *Answer         `json:"answer,omitempty"`
	Message        string          `json:"message,omitempty"`
	Reason         Reason          `json:"reason,omitempty"`
	TraceID        string          `json:"trace_id,omitempty"`
	At             time.Time       `json:"at"`

	// Encoded, if set, is the event's JSON encoding (the fields above, as
	// JSON returns it), made once where the event is complete (masked and
	// numbered), so that the store and the publisher pass the same bytes on
	// rather than encoding it each. A change to the event after that must
	// clear it.
	Encoded []byte `json:"-"`
}

// Final reports whether e ends a turn's stream.
func (e Event) Final() bool { return e.Type == EventDone || e.Type == EventError }

// JSON returns the event's JSON encoding: Encoded if it is set, else the
// encoding made now.
func (e *Event) JSON() ([]byte, error) {
	if len(e.Encoded) > 0 {
		return e.Encoded, nil
	}
	return json.Marshal(e)
}

// encode sets e.Encoded. An event that cannot be encoded is left without
// it: the store or the publisher reports why when it encodes it.
func (e *Event) encode() {
	e.Encoded = nil
	if b, err := json.Marshal(e); err == nil {
		e.Encoded = b
	}
}
