// Package scripted is a test double of an agent backend: it plays a script
// of steps, one per call, instead of running an agent.
//
// Tests of chat, the worker and the API use it to decide what "the agent"
// answers, which events it reports, how long it takes and how it fails:
//
//	b := scripted.New("")
//	b.Push(scripted.Step{Answer: &chat.Answer{...}})
//	b.Push(scripted.Step{Text: "not JSON"}, scripted.Step{Hang: true})
//
// Sessions live in memory: a new session (seeded or none) gets the id
// scripted-<n>, a fork copies its parent's history under a new id, a resume
// appends to the same id. Forget drops a session to simulate a lost one.
package scripted

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prchat/prchat/chat"
)

// DefaultName is the name of a Backend made with an empty name.
const DefaultName = "scripted"

// ErrScriptExhausted is what a call returns when the script is empty and
// there is no Fallback.
var ErrScriptExhausted = errors.New("script exhausted")

// Step is what one call does: it emits Events in order, then waits (Wait,
// Hang), then returns Err, or the answer (Answer, else Text) with Usage.
type Step struct {
	// Text is the raw final text (a JSON answer, or anything to test
	// invalid answers).
	Text string
	// Answer, when set, is marshalled into Text.
	Answer *chat.Answer
	// Events are emitted in order before the call waits or returns.
	Events []chat.Event
	// Wait, when set, blocks the call until it is closed or ctx ends.
	Wait <-chan struct{}
	// Hang blocks the call until ctx ends.
	Hang bool
	// Err, when set, is returned (after Events and waiting) and the
	// session is left as it was.
	Err error
	// Usage is the call's usage.
	Usage chat.Usage
	// SessionID, when set, is the id of the call's session instead of the
	// one the mode gives; the session's history is kept under it.
	SessionID string
}

// Backend is a scripted agent backend. It implements chat.Backend and is
// safe for concurrent use.
type Backend struct {
	// Fallback, if set, gives the step of a call when the script is empty;
	// without it such a call fails with ErrScriptExhausted. Set it before
	// the backend is in use.
	Fallback func(chat.RunRequest) Step

	name string

	mu          sync.Mutex
	steps       []Step
	requests    []chat.RunRequest
	sessions    map[string][]string // id -> prompts received
	nextID      int
	unavailable error
}

var _ chat.Backend = (*Backend)(nil)

// New returns a scripted backend with an empty script that reports name as
// its Name (DefaultName if empty).
func New(name string) *Backend {
	return &Backend{name: cmp.Or(name, DefaultName), sessions: map[string][]string{}}
}

// Push appends steps to the script; each call consumes the next one.
func (b *Backend) Push(steps ...Step) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.steps = append(b.steps, steps...)
}

// Pending returns how many pushed steps no call has consumed yet.
func (b *Backend) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.steps)
}

// Requests returns every call's request so far, in order, including calls
// that failed.
func (b *Backend) Requests() []chat.RunRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.requests)
}

// History returns the prompts session id received, oldest first (a fork's
// history starts with its parent's), or nil for an unknown session.
func (b *Backend) History(id string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.sessions[id])
}

// Sessions returns the ids of the sessions the backend holds, sorted.
func (b *Backend) Sessions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.sessions))
}

// Forget deletes session id, as if its files were lost.
func (b *Backend) Forget(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.sessions, id)
}

// SetAvailable makes Available return err (nil: available, the default), to
// simulate a backend that is not installed on this worker.
func (b *Backend) SetAvailable(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unavailable = err
}

// Name returns the backend's name.
func (b *Backend) Name() string { return b.name }

// Available returns nil unless SetAvailable set an error.
func (b *Backend) Available(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.unavailable != nil {
		return fmt.Errorf("%s backend: %w", b.name, b.unavailable)
	}
	return nil
}

// HasSession returns nil for a session the backend holds, else an error
// wrapping chat.ErrSessionGone.
func (b *Backend) HasSession(_ context.Context, ref chat.SessionRef) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.sessions[ref.ID]; !ok {
		return fmt.Errorf("%s backend: session %q: %w", b.name, ref.ID, chat.ErrSessionGone)
	}
	return nil
}

// Run records req and plays the next step of the script. Forking or
// resuming a session the backend does not hold fails with an error wrapping
// chat.ErrSessionGone and consumes no step, and so does a call whose ctx
// already ended. A call whose ctx ends while it waits returns an error
// wrapping ctx.Err().
func (b *Backend) Run(ctx context.Context, req chat.RunRequest, emit func(chat.Event)) (chat.RunResult, error) {
	step, history, err := b.begin(ctx, req)
	if err != nil {
		return chat.RunResult{}, err
	}
	for _, e := range step.Events {
		if e.At.IsZero() {
			e.At = time.Now()
		}
		emit(e)
	}
	if err := wait(ctx, step); err != nil {
		return chat.RunResult{}, fmt.Errorf("%s backend: %w", b.name, err)
	}
	if step.Err != nil {
		return chat.RunResult{}, step.Err
	}
	text := step.Text
	if step.Answer != nil {
		raw, err := json.Marshal(step.Answer)
		if err != nil {
			return chat.RunResult{}, fmt.Errorf("%s backend: marshal the scripted answer: %w", b.name, err)
		}
		text = string(raw)
	}
	id := b.finish(req, step, history)
	return chat.RunResult{Text: text, SessionID: id, Model: req.Model, Usage: step.Usage}, nil
}

// begin records req, checks the session it forks or resumes and ctx, and
// takes the call's step. It returns the history the call's session starts
// with.
func (b *Backend) begin(ctx context.Context, req chat.RunRequest) (Step, []string, error) {
	b.mu.Lock()
	b.requests = append(b.requests, req)
	var history []string
	switch req.Mode {
	case chat.SessionForked, chat.SessionResumed:
		h, ok := b.sessions[req.Session.ID]
		if !ok {
			b.mu.Unlock()
			return Step{}, nil, fmt.Errorf("%s backend: %s session %q: %w", b.name, verb(req.Mode), req.Session.ID, chat.ErrSessionGone)
		}
		history = slices.Clone(h)
	}
	if err := ctx.Err(); err != nil {
		b.mu.Unlock()
		return Step{}, nil, fmt.Errorf("%s backend: %w", b.name, err)
	}
	if len(b.steps) > 0 {
		step := b.steps[0]
		b.steps = b.steps[1:]
		b.mu.Unlock()
		return step, history, nil
	}
	fallback := b.Fallback
	b.mu.Unlock()
	if fallback == nil {
		return Step{}, nil, fmt.Errorf("%s backend: %w", b.name, ErrScriptExhausted)
	}
	return fallback(req), history, nil
}

// finish stores the session of a call that succeeded and returns its id.
func (b *Backend) finish(req chat.RunRequest, step Step, history []string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := step.SessionID
	if id == "" {
		if req.Mode == chat.SessionResumed {
			id = req.Session.ID
		} else {
			b.nextID++
			id = fmt.Sprintf("scripted-%d", b.nextID)
		}
	}
	if req.Mode == chat.SessionResumed {
		// A resume continues the session as it is now (other calls may have
		// resumed it meanwhile).
		if h, ok := b.sessions[req.Session.ID]; ok {
			history = h
		}
	}
	b.sessions[id] = append(slices.Clip(history), req.Prompt)
	return id
}

// wait blocks as step says until it may return, or ctx ends.
func wait(ctx context.Context, step Step) error {
	switch {
	case step.Hang:
		<-ctx.Done()
		return ctx.Err()
	case step.Wait != nil:
		select {
		case <-step.Wait:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func verb(m chat.SessionMode) string {
	if m == chat.SessionForked {
		return "fork"
	}
	return "resume"
}
