package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/prchat/prchat/chat"
)

// Sessions stores the message histories of the backend's sessions. The
// daemon keeps them in its database, so that any worker can fork or resume
// a session; MemorySessions keeps them in memory.
//
// A history is a JSON array of Message objects, oldest first. The interface
// speaks JSON documents, not Message values, so that a store can implement
// it without importing this package. A history is saved whole after each
// call that answered, masked by Config.Mask first. Implementations must be
// safe for concurrent use.
type Sessions interface {
	// Load returns the history of session id. A session that does not
	// exist is an error wrapping chat.ErrSessionGone.
	Load(ctx context.Context, id string) (json.RawMessage, error)
	// Save stores history as the whole history of session id, creating the
	// session or replacing its history.
	Save(ctx context.Context, id string, history json.RawMessage) error
}

// Message is one message of a session's history: the question prompts
// (role "user"), the model's replies ("assistant", with the tools it
// called) and the tools' results ("tool"). prchat's system instructions are
// not part of it; each call sends the current ones. It marshals to JSON as
// it should be stored.
type Message struct {
	Role string `json:"role"`
	// Content is the message's text.
	Content string `json:"content,omitempty"`
	// ToolCalls are the tools an assistant message called.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and ToolName say which call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
}

// Roles of a Message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ToolCall is one tool call of the model.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the call's JSON arguments, as the model wrote them.
	Arguments string `json:"arguments"`
}

// MemorySessions keeps sessions in memory: for tests, and for sessions that
// need not outlive the process. The zero value is not usable; call
// NewMemorySessions.
type MemorySessions struct {
	mu       sync.Mutex
	sessions map[string][]byte
}

var _ Sessions = (*MemorySessions)(nil)

// NewMemorySessions returns an empty MemorySessions.
func NewMemorySessions() *MemorySessions {
	return &MemorySessions{sessions: map[string][]byte{}}
}

// Load returns a copy of the history of session id, or an error wrapping
// chat.ErrSessionGone.
func (s *MemorySessions) Load(_ context.Context, id string) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.sessions[id]
	if !ok {
		return nil, fmt.Errorf("load session %s: %w", id, chat.ErrSessionGone)
	}
	return slices.Clone(h), nil
}

// Save stores a copy of history as the history of session id.
func (s *MemorySessions) Save(_ context.Context, id string, history json.RawMessage) error {
	if !json.Valid(history) {
		return fmt.Errorf("save session %s: the history is not JSON", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions[id] = slices.Clone(history)
	return nil
}

// Messages returns the decoded history of session id.
func (s *MemorySessions) Messages(ctx context.Context, id string) ([]Message, error) {
	raw, err := s.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	return decodeHistory(id, raw)
}

// Delete drops session id, as if it were lost.
func (s *MemorySessions) Delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, id)
}

// IDs returns the ids of the sessions held, sorted.
func (s *MemorySessions) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// decodeHistory decodes a stored history.
func decodeHistory(id string, raw json.RawMessage) ([]Message, error) {
	var msgs []Message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, fmt.Errorf("decode the history of session %s: %w", id, err)
	}
	return msgs, nil
}

// encodeHistory encodes a history to save, each text passed through mask
// (if set) first.
func encodeHistory(msgs []Message, mask func(string) string) (json.RawMessage, error) {
	if mask != nil {
		masked := make([]Message, len(msgs))
		for i, m := range msgs {
			m.Content = mask(m.Content)
			m.ToolCalls = slices.Clone(m.ToolCalls)
			for j := range m.ToolCalls {
				m.ToolCalls[j].Arguments = mask(m.ToolCalls[j].Arguments)
			}
			masked[i] = m
		}
		msgs = masked
	}
	if msgs == nil {
		msgs = []Message{}
	}
	raw, err := json.Marshal(msgs)
	if err != nil {
		return nil, fmt.Errorf("encode a history: %w", err)
	}
	return raw, nil
}
