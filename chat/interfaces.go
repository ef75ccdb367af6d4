package chat

import (
	"context"
	"encoding/json"
	"time"
)

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
	// The feed events, if any, go to their repositories' feeds before the
	// job is put, in a round trip the queue makes anyway (a new turn's
	// "queued": no worker's "running" can come before it).
	Enqueue(ctx context.Context, turnID, host string, feed ...FeedEvent) error
	// Cancel stops the turn's job: a running handler's context is cancelled,
	// a waiting or archived job is removed.
	Cancel(ctx context.Context, turnID string) error
	// RemoveRunDir has the worker host ("" = any worker) remove a run
	// directory on its disk (a deleted conversation's).
	RemoveRunDir(ctx context.Context, host, dir string) error
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
	// are published: each one value (one pointer) shared by every follower
	// of the turn in the process, which no one changes, so that what is
	// made of an event (the API's SSE frame) is made once for all. The channel closes when ctx
	// ends, or early when the subscriber falls too far behind (then catch
	// up from the store and follow again).
	Follow(ctx context.Context, turnID string, after int64) (<-chan *Event, error)
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
