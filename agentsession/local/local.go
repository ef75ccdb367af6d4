// Package local is prchat's offline agent backend (chat.BackendLocal): no
// model, just the code's structure, read from the run directory's checkout.
//
// On the first question about a review head it builds a structural index
// of the checkout (package index: Go through go/parser and go/types, Python
// and TypeScript/JavaScript through recursive-descent parsers of its own,
// Lua through gopher-lua's parser; all pure Go, no cgo) and keeps it in the
// run directory's private folder and in memory, so later questions answer
// at once. It reads the question for its kind and the names it mentions
// and answers from the index:
//
//   - where is X declared or defined, is X exported: its definitions, or
//     that it is declared nowhere in the head commit (go/types finds it
//     undefined), which means the PR does not compile;
//   - who calls or uses X, what breaks if X changes: its uses, by file and
//     enclosing function;
//   - which types implement I, what does T implement, T's methods: method
//     sets (go/types for Go; declared and structural for classes);
//   - what changed in F, in a file or in the PR: the diff base..head mapped
//     onto the enclosing definitions, with renames and moves and their old
//     names;
//   - why does F return E, when does F fail, what happens when X is empty:
//     the return statements and the guards on their path;
//   - what does this code do (a focus range): the enclosing function, what
//     the range calls and returns, and the lines the PR changed in it;
//   - is X tested: the tests that use X, or reach it through its callers.
//
// Answers are plain sentences, the finding first, then the evidence with
// citations, and end by saying that no model read the code. A question of
// another kind, or about names the index does not know, gets the best
// text search there is (the question's identifiers, file names and words,
// ranked), and says so. It keeps no sessions, costs nothing and gives the
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
	"strings"
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
	// MaxCitations is how many citations an answer has at most; default
	// 10 (a text search cites at most 5).
	MaxCitations int
	// Git is the git binary that reads the PR's diff; default "git" from
	// PATH.
	Git string
}

// Backend is the local backend. It implements chat.Backend and is safe for
// concurrent use.
type Backend struct {
	log          *slog.Logger
	limits       codesearch.Limits
	maxCitations int
	git          string
}

var _ chat.Backend = (*Backend)(nil)

// New returns the local backend.
func New(cfg Config) *Backend {
	return &Backend{
		log:          cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		limits:       cfg.Limits,
		maxCitations: cmp.Or(cfg.MaxCitations, 10),
		git:          cfg.Git,
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

// Tool call ids of a turn's events: the structural lookup, and the text
// search it falls back to.
const (
	structureID = "local-structure-1"
	toolID      = "local-search-1"
)

// Run answers req.Question (or req.Prompt, if there is no question) from
// the structure of req.Dir, or from a search of it. It emits a
// code_structure tool_start and tool_result (and search_code ones when it
// falls back to a search) and the answer's markdown as a text_delta, and
// returns the answer as JSON in RunResult.Text with no session id and a
// cost of zero. Forking or resuming a session fails with an error wrapping
// chat.ErrSessionGone.
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
	focus := focusAnchors(req.Focus)

	emit(chat.Event{Type: chat.EventToolStart, ToolID: structureID, ToolName: "code_structure",
		Input: mustJSON(structureInput{Head: req.Review.HeadSHA, Base: req.Review.BaseSHA, FocusPaths: focusPaths(focus)}), At: time.Now()})
	ix, built, err := b.index(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return chat.RunResult{}, fmt.Errorf("local backend: %w", ctx.Err())
		}
		return chat.RunResult{}, fmt.Errorf("local backend: %w", err)
	}
	q := readQuestion(question, ix, len(focus) > 0)
	r := &reply{max: b.maxCitations}
	ans := &answerer{ix: ix, q: q, focus: focus, r: r}
	ok, why := ans.answer()
	summary := fmt.Sprintf("%s question about %s: %s", q.kind, nameList(q.targets, q.files), plural(len(r.cites), "citation", "citations"))
	if !ok {
		summary = fmt.Sprintf("%s question: the structure does not answer it", q.kind)
	}
	if built {
		summary += fmt.Sprintf(" (indexed %s, %s)", plural(len(ix.Files), "source file", "source files"), mb(ix.Bytes))
	}
	emit(chat.Event{Type: chat.EventToolResult, ToolID: structureID, ToolName: "code_structure", Summary: summary, At: time.Now()})

	var answer chat.Answer
	if ok {
		answer = chat.Answer{AnswerMarkdown: r.markdown(), Citations: r.cites}
	} else {
		answer, err = b.searchAnswer(ctx, req.Dir, question, focus, why, emit)
		if err != nil {
			return chat.RunResult{}, err
		}
	}
	if answer.Citations == nil {
		answer.Citations = []chat.Citation{}
	}
	emit(chat.Event{Type: chat.EventTextDelta, Text: answer.AnswerMarkdown, At: time.Now()})
	text, err := json.Marshal(answer)
	if err != nil {
		return chat.RunResult{}, fmt.Errorf("local backend: marshal the answer: %w", err)
	}
	b.log.DebugContext(ctx, "local answer",
		slog.String("kind", q.kind.String()),
		slog.Bool("structural", ok),
		slog.Int("citations", len(answer.Citations)),
		slog.Duration("took", time.Since(start)))
	zero := 0.0
	return chat.RunResult{Text: string(text), Usage: chat.Usage{CostUSD: &zero}}, nil
}

// searchAnswer answers from a text search, saying first why the structure
// did not answer.
func (b *Backend) searchAnswer(ctx context.Context, dir, question string, focus []chat.Anchor, why string, emit func(chat.Event)) (chat.Answer, error) {
	terms := extractTerms(question)
	emit(chat.Event{Type: chat.EventToolStart, ToolID: toolID, ToolName: "search_code",
		Input: mustJSON(toolInput{Terms: termTexts(terms), FocusPaths: focusPaths(focus)}), At: time.Now()})
	res := &searchResult{}
	if len(terms) > 0 {
		var err error
		res, err = search(ctx, dir, terms, focus, b.limits)
		if err != nil {
			return chat.Answer{}, fmt.Errorf("local backend: %w", err)
		}
	}
	emit(chat.Event{Type: chat.EventToolResult, ToolID: toolID, ToolName: "search_code", Summary: res.summary(), At: time.Now()})
	picks := pick(res, min(b.maxCitations, 5))
	md := "I cannot answer this from the code's structure (" + why + "), so this is the best text search I have.\n\n" + render(terms, res, picks)
	return chat.Answer{AnswerMarkdown: md, Citations: citations(picks)}, nil
}

// structureInput is the input of the code_structure event.
type structureInput struct {
	Head       string   `json:"head,omitempty"`
	Base       string   `json:"base,omitempty"`
	FocusPaths []string `json:"focus_paths,omitempty"`
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

func nameList(names, files []string) string {
	all := append(append([]string{}, names...), files...)
	if len(all) == 0 {
		return "no known name"
	}
	if len(all) > 4 {
		all = append(all[:4], "...")
	}
	return strings.Join(all, ", ")
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

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
// An anchor on lines of the base (lines the PR removed) keeps its file but
// not its lines: the checkout is the head, where those numbers are other
// lines.
func focusAnchors(f *chat.Focus) []chat.Anchor {
	if f == nil {
		return nil
	}
	var out []chat.Anchor
	for _, a := range f.Anchors {
		if a.Side == chat.SideBase {
			a = chat.Anchor{Path: a.Path}
		}
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
