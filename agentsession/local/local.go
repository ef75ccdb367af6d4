// Package local is prchat's offline agent backend (chat.BackendLocal): no
// model, just a search of the run directory's checkout.
//
// It takes the question's identifiers (parseConfig, max_retries,
// Config.Validate), file names and paths (main.go, chat/mask) and ordinary
// words other than stopwords, searches the checkout for them (skipping what
// package codesearch skips), ranks the matching lines (rarer and more
// specific terms, definitions, lines with several terms and the files the
// question's focus points at count more) and answers with a short summary of
// what matched where and citations of the best lines. It answers honestly
// when nothing matches. It keeps no sessions, costs nothing and gives the
// same answer to the same question about the same checkout.
package local

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prchat/prchat/agentsession/codesearch"
	"github.com/prchat/prchat/chat"
)

// Config configures the local backend. The zero Config is ready to use.
type Config struct {
	// Logger receives what the backend does (sizes and durations, never the
	// question); default: discard.
	Logger *slog.Logger
	// Limits bound the search of a checkout; zero fields take codesearch's
	// defaults (20000 files, 512 KiB a file, 64 MiB in all).
	Limits codesearch.Limits
	// MaxCitations is how many citations an answer has at most; default 5.
	MaxCitations int
}

// Backend is the local backend. It implements chat.Backend and is safe for
// concurrent use.
type Backend struct {
	log          *slog.Logger
	limits       codesearch.Limits
	maxCitations int
}

var _ chat.Backend = (*Backend)(nil)

// New returns the local backend.
func New(cfg Config) *Backend {
	return &Backend{
		log:          cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		limits:       cfg.Limits,
		maxCitations: cmp.Or(cfg.MaxCitations, 5),
	}
}

// Name returns chat.BackendLocal.
func (b *Backend) Name() string { return chat.BackendLocal }

// Available returns nil: the local backend needs nothing but the checkout.
func (b *Backend) Available(context.Context) error { return nil }

// errNoSessions is why the local backend has no session to fork or resume.
var errNoSessions = fmt.Errorf("the local backend keeps no sessions: %w", chat.ErrSessionGone)

// HasSession always returns an error wrapping chat.ErrSessionGone: the local
// backend keeps no sessions.
func (b *Backend) HasSession(_ context.Context, ref chat.SessionRef) error {
	return fmt.Errorf("session %q: %w", ref.ID, errNoSessions)
}

// toolID is the id of the local backend's one tool call in a turn's events.
const toolID = "local-search-1"

// Run answers req.Question (or req.Prompt, if there is no question) from a
// search of req.Dir. It emits a search_code tool_start and tool_result and
// the answer's markdown as a text_delta, and returns the answer as JSON in
// RunResult.Text with no session id and a cost of zero. Forking or resuming
// a session fails with an error wrapping chat.ErrSessionGone.
func (b *Backend) Run(ctx context.Context, req chat.RunRequest, emit func(chat.Event)) (chat.RunResult, error) {
	start := time.Now()
	switch req.Mode {
	case chat.SessionForked, chat.SessionResumed:
		return chat.RunResult{}, fmt.Errorf("local backend: %s session %q: %w", req.Mode, req.Session.ID, errNoSessions)
	}
	if err := ctx.Err(); err != nil {
		return chat.RunResult{}, fmt.Errorf("local backend: %w", err)
	}
	if req.Dir == "" {
		return chat.RunResult{}, errors.New("local backend: the request has no run directory")
	}
	if fi, err := os.Stat(req.Dir); err != nil || !fi.IsDir() {
		return chat.RunResult{}, fmt.Errorf("local backend: run directory %s is not there", req.Dir)
	}
	question := cmp.Or(req.Question, req.Prompt)
	terms := extractTerms(question)
	focus := focusAnchors(req.Focus)

	input, err := json.Marshal(toolInput{Terms: termTexts(terms), FocusPaths: focusPaths(focus)})
	if err != nil {
		return chat.RunResult{}, fmt.Errorf("local backend: %w", err)
	}
	emit(chat.Event{Type: chat.EventToolStart, ToolID: toolID, ToolName: "search_code", Input: input, At: time.Now()})

	var res *searchResult
	if len(terms) > 0 {
		res, err = search(ctx, req.Dir, terms, focus, b.limits)
		if err != nil {
			return chat.RunResult{}, fmt.Errorf("local backend: %w", err)
		}
	} else {
		res = &searchResult{}
	}
	emit(chat.Event{Type: chat.EventToolResult, ToolID: toolID, ToolName: "search_code", Summary: res.summary(), At: time.Now()})

	picks := pick(res, b.maxCitations)
	answer := chat.Answer{AnswerMarkdown: render(terms, res, picks), Citations: citations(picks)}
	emit(chat.Event{Type: chat.EventTextDelta, Text: answer.AnswerMarkdown, At: time.Now()})
	text, err := json.Marshal(answer)
	if err != nil {
		return chat.RunResult{}, fmt.Errorf("local backend: marshal the answer: %w", err)
	}
	b.log.DebugContext(ctx, "local search",
		slog.Int("terms", len(terms)),
		slog.Int("files_searched", res.stats.Files),
		slog.Int("matching_files", len(res.files)),
		slog.Int("citations", len(picks)),
		slog.Duration("took", time.Since(start)))
	zero := 0.0
	return chat.RunResult{Text: string(text), Usage: chat.Usage{CostUSD: &zero}}, nil
}

// toolInput is the input of the search_code event.
type toolInput struct {
	Terms      []string `json:"terms"`
	FocusPaths []string `json:"focus_paths,omitempty"`
}

func termTexts(terms []term) []string {
	out := make([]string, len(terms))
	for i, t := range terms {
		out[i] = t.Text
	}
	return out
}

// focusAnchors returns the anchors of a question's focus that name a file.
func focusAnchors(f *chat.Focus) []chat.Anchor {
	if f == nil {
		return nil
	}
	var out []chat.Anchor
	for _, a := range f.Anchors {
		if a.Path != "" {
			out = append(out, a)
		}
	}
	return out
}

func focusPaths(anchors []chat.Anchor) []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range anchors {
		if !seen[a.Path] {
			seen[a.Path] = true
			out = append(out, a.Path)
		}
	}
	return out
}
