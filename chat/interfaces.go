package chat

import (
	"context"
	"encoding/json"
	"time"
)

// Store persists repositories, reviews, conversations, turns and their
// events. Implemented by package store on Postgres and SQLite.
//
// Lookups of missing rows return an *Error with CodeRepositoryNotFound,
// CodeNoReview or CodeNotFound. Methods that take a fence return ErrFenced
// when the turn's current fencing token is another.
type Store interface {
	// UpsertRepository registers r by name, or updates the clone path and URL
	// of the repository with that name. It fills r's ID and CreatedAt and
	// reports whether the repository is new.
	UpsertRepository(ctx context.Context, r *Repository) (created bool, err error)
	Repository(ctx context.Context, name string) (Repository, error)
	Repositories(ctx context.Context) ([]Repository, error)

	// CreateReview stores r as the next version (1, 2, ...) of its PR and fills
	// r's ID, Version and CreatedAt.
	CreateReview(ctx context.Context, r *Review) error
	// Review returns a version of a PR's review; version 0 is the latest.
	Review(ctx context.Context, repo string, pr, version int) (Review, error)
	ReviewByID(ctx context.Context, id int64) (Review, error)
	// Reviews lists a PR's review versions, oldest first.
	Reviews(ctx context.Context, repo string, pr int) ([]Review, error)

	// CreateConversation inserts c and its first turn t (state queued) in one
	// transaction. It fills the ids, numbers and times of both.
	CreateConversation(ctx context.Context, c *Conversation, t *Turn) error
	// AddTurn inserts t as the conversation's next turn (state queued). A
	// conversation with a queued or running turn refuses it with CodeBusy.
	AddTurn(ctx context.Context, t *Turn) error
	// Conversation returns a conversation with all its turns.
	Conversation(ctx context.Context, id string) (Conversation, error)
	// ConversationHead returns a conversation without its turns.
	ConversationHead(ctx context.Context, id string) (Conversation, error)
	// Conversations lists a PR's conversations, newest first, without turns.
	Conversations(ctx context.Context, repo string, pr int) ([]Conversation, error)
	// DeleteConversation deletes a conversation with its turns and events.
	DeleteConversation(ctx context.Context, id string) error

	Turn(ctx context.Context, conversationID string, number int) (Turn, error)
	TurnByID(ctx context.Context, id string) (Turn, error)
	// PendingTurns lists turns in state queued or running, oldest first.
	PendingTurns(ctx context.Context) ([]Turn, error)
	// SetTurnQueue records the host queue a turn's job went to ("" = shared).
	SetTurnQueue(ctx context.Context, id, queue string) error

	// ClaimTurn marks a queued or running turn running for runner with a
	// fresh fencing token (the old one plus one) and returns it. A queued
	// turn is claimed at once; for a running one, allow is asked with the
	// turn as stored and may refuse (false) a takeover of a turn another
	// live run holds; then ClaimTurn returns ErrFenced. A turn in a final
	// state returns ErrSettled.
	ClaimTurn(ctx context.Context, id, runner string, allow func(Turn) bool) (Turn, error)
	// ClaimTurnWithConversation is ClaimTurn that also returns the head of
	// the turn's conversation (as ConversationHead), read with the claim:
	// a run needs both.
	ClaimTurnWithConversation(ctx context.Context, id, runner string, allow func(Turn) bool) (Turn, Conversation, error)
	// ReleaseTurn puts a running turn that the run holding fence cannot
	// finish (its worker stops) back to queued, with no runner, and returns
	// it: the next run claims it at once and its claim's fresh fence fences
	// that run off. A turn that run no longer holds returns ErrFenced.
	ReleaseTurn(ctx context.Context, id string, fence int64) (Turn, error)
	// AppendEvents stores events of a turn whose fence is current.
	AppendEvents(ctx context.Context, turnID string, fence int64, events []Event) error
	// FinishTurn stores the outcome of the run holding fence and settles the
	// turn, in one transaction with the conversation's session update.
	FinishTurn(ctx context.Context, turnID string, fence int64, o Outcome) error
	// SettleTurn settles a pending turn whoever holds it (cancel, reconciler)
	// and takes a fresh fence so that no run can store into it any more. It
	// numbers events (the final ones, their Seq unset) after the turn's last
	// stored event and stores them in the same transaction, so that a
	// settled turn is never read without its final event. It returns the
	// settled turn with that fence and its LastSeq the Seq of the last of
	// events, or ErrSettled.
	SettleTurn(ctx context.Context, turnID string, state State, reason Reason, note string, events []Event) (Turn, error)
	// Events returns the stored events of a turn with Seq > after, in order.
	Events(ctx context.Context, turnID string, after int64) ([]Event, error)

	// Ping checks that the database answers.
	Ping(ctx context.Context) error
}

// Outcome is what a run stores when it settles a turn.
type Outcome struct {
	State  State
	Reason Reason
	Answer *Answer
	Note   string
	Usage  Usage
	// Backend and Model that ran the turn, and how its session started.
	Backend string
	Model   string
	Session SessionMode
	// Conversation, if set, updates the conversation's session.
	Conversation *SessionInfo
	// SessionFile, if set, is stored as the conversation's session file
	// in the same fenced write as the answer (a stale run stores nothing).
	SessionFile *SealedSessionFile
	// Events are stored with the outcome (the final ones).
	Events []Event
}

// SessionInfo is where a conversation's own agent session lives.
type SessionInfo struct {
	SessionID    string
	SessionHost  string
	RunDir       string
	Backend      string
	Model        string
	Session      SessionMode
	SeededReason string
}

// HistoryStore keeps the message histories of sessions that live in the
// database (the openai backend's). Implemented by package store.
type HistoryStore interface {
	SaveHistory(ctx context.Context, backend, sessionID string, history json.RawMessage) error
}

// Observer is told about every settled run of a turn, for metrics.
// Implemented by package worker.
type Observer interface {
	TurnSettled(TurnStats)
}

// TurnStats describe one finished run of a turn.
type TurnStats struct {
	Backend string
	State   State
	Reason  Reason
	Session SessionMode
	// QueueWait is from the question to the start of the run; Duration is
	// the run's own time. Both are 0 for a turn settled by a cancel or the
	// reconciler rather than by its run.
	QueueWait time.Duration
	Duration  time.Duration
	Usage     Usage
	// Restore is how long writing the stored session files into the CLI's
	// state took (0 when none was restored); SessionBytes is the size of
	// the session file stored with the outcome (0 when none).
	Restore      time.Duration
	SessionBytes int64
}

// Queue carries turn jobs to workers. Implemented by package worker.
type Queue interface {
	// Enqueue puts a job for the turn on host's queue ("" = the shared queue).
	// The job's id is the turn id; a job that already exists is not an error.
	Enqueue(ctx context.Context, turnID, host string) error
	// Cancel stops the turn's job: a running handler's context is cancelled,
	// a waiting or archived job is removed.
	Cancel(ctx context.Context, turnID string) error
	// RemoveRunDir has the worker host ("" = any worker) remove a run
	// directory on its disk (a deleted conversation's).
	RemoveRunDir(ctx context.Context, host, dir string) error
	// Ping checks that the queue's broker answers.
	Ping(ctx context.Context) error
}

// Hosts tells which workers are alive. Implemented by package worker from
// the workers' heartbeats.
type Hosts interface {
	// Alive reports whether a worker with this id (host) sends heartbeats.
	Alive(ctx context.Context, host string) (bool, error)
	// RunnerAlive reports whether this worker run (as returned by a worker's
	// runner id, host/instance) is still the live instance of its host.
	RunnerAlive(ctx context.Context, runner string) (bool, error)
}

// Publisher delivers events live to subscribers in any API process
// (through Redis streams in production). Optional: without one, clients
// read the stored transcript.
type Publisher interface {
	// Publish delivers a turn's events, already stored, in order, and the
	// turn's state changes to its repository's feed (feed may be empty), in
	// one round trip.
	Publish(ctx context.Context, turnID string, events []Event, feed []FeedEvent) error
	// PublishFeed delivers a turn's state change to the repository's feed.
	PublishFeed(ctx context.Context, repo string, e FeedEvent) error
}

// Follower follows what a Publisher delivers. Implemented by package worker.
type Follower interface {
	// Follow returns the live events of a turn with Seq > after, as they
	// are published: each one value shared by every follower of the turn
	// in the process, which no one changes. The channel closes when ctx
	// ends, or early when the subscriber falls too far behind (then catch
	// up from the store and follow again).
	Follow(ctx context.Context, turnID string, after int64) (<-chan *SharedEvent, error)
	// FollowFeed returns a repository's feed events published after the
	// feed position after ("" = from now): those still in the feed first,
	// whoever else follows it, then the live ones. Closing is as for
	// Follow.
	FollowFeed(ctx context.Context, repo, after string) (<-chan FeedEvent, error)
}

// FeedEvent is a turn's state change, as a repository's feed shows it.
type FeedEvent struct {
	// ID is the event's position in the feed (set by the Follower).
	ID             string    `json:"-"`
	Type           string    `json:"type"` // always "turn"
	Repository     string    `json:"repository"`
	PR             int       `json:"pr"`
	ConversationID string    `json:"conversation_id"`
	Turn           int       `json:"turn"`
	State          State     `json:"state"`
	Reason         Reason    `json:"reason,omitempty"`
	At             time.Time `json:"at"`
}

// Backend is an agent that can answer a turn: it starts, resumes or forks a
// session in a run directory. Implemented in package agentsession.
type Backend interface {
	// Name is the backend's name (claude-code, codex, openai, local, ...).
	Name() string
	// Available returns nil when the backend can run on this worker, else
	// why not (binary missing, no key).
	Available(ctx context.Context) error
	// HasSession returns nil when the session can be forked or resumed here,
	// else why not (wrapping ErrSessionGone).
	HasSession(ctx context.Context, ref SessionRef) error
	// Run runs one agent call of a turn. It reports events while it runs and
	// returns the result. It stops and returns when ctx ends, killing any
	// process it started.
	Run(ctx context.Context, req RunRequest, emit func(Event)) (RunResult, error)
}

// SessionRef names an agent session: its id and the directory it ran in.
type SessionRef struct {
	ID  string
	Dir string
}

// RunRequest is one agent call.
type RunRequest struct {
	// Mode: SessionForked forks Session into a new session, SessionResumed
	// continues Session, SessionSeeded and SessionNone start a new one.
	Mode    SessionMode
	Session SessionRef
	// Dir is the run directory the agent works in (a checkout of the head).
	Dir string
	// Prompt is the user message of this call; System is prchat's
	// instructions, appended to the agent's own system prompt.
	Prompt string
	System string
	// Schema is the answer's JSON Schema.
	Schema json.RawMessage
	Model  string
	// Endpoint is, for the openai backend, the OpenAI-compatible endpoint of
	// the turn's provider with its key (nil: the backend's own settings).
	Endpoint *Endpoint
	// MaxCalls and MaxTokens are what is left of the turn's budget.
	MaxCalls  int
	MaxTokens int64
	// Question, Focus, Repository and Review describe the turn, for backends
	// that work from them directly (local) or need the PR's SHAs (git_diff).
	Question   string
	Focus      *Focus
	Repository Repository
	Review     Review
}

// RunResult is what an agent call returned.
type RunResult struct {
	// Text is the final message; it should hold the answer as JSON.
	Text string
	// Structured is the answer when the backend returned it as structured
	// output (it wins over Text).
	Structured json.RawMessage
	// SessionID is the session the call ran in ("" when it kept none).
	SessionID string
	Model     string
	Usage     Usage
}

// Workspaces prepares the run directories agents work in. Implemented in
// package agentsession.
type Workspaces interface {
	// Prepare makes a new run directory for a conversation: a checkout of the
	// repository at the review's head and the private folder holding the
	// seed (the saved review, earlier turns). A head commit missing from the
	// clone is an *Error with CodeNeedsClone.
	Prepare(ctx context.Context, s Seed) (dir string, err error)
	// Exists reports whether a run directory is still there.
	Exists(dir string) bool
	// Remove deletes a run directory made by Prepare.
	Remove(ctx context.Context, dir string) error
	// LineCount returns the number of lines of path at commit sha of the
	// repository, or an error if there is no such file.
	LineCount(ctx context.Context, repo Repository, sha, path string) (int, error)
}

// Seed is what a new run directory is made from.
type Seed struct {
	Repository   Repository
	Review       Review
	Conversation Conversation
	// Turns are the conversation's earlier turns, oldest first.
	Turns []Turn
}

// Clock tells the time; tests may replace it.
type Clock func() time.Time
