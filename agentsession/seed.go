package agentsession

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prchat/prchat/chat"
)

// Names of the files in a run directory's private folder (chat.PrivateDir).
const (
	// ReviewFile holds the saved review, rendered as markdown.
	ReviewFile = "review.md"
	// TurnsFile holds the conversation's earlier turns, rendered as markdown.
	TurnsFile = "turns.md"
	// ContextFile holds the repository, PR, version and SHAs as JSON (see
	// SeedContext).
	ContextFile = "context.json"
)

// SeedContext is the content of a run directory's context.json.
type SeedContext struct {
	Repository     string `json:"repository"`
	PR             int    `json:"pr"`
	Version        int    `json:"version"`
	HeadSHA        string `json:"head_sha"`
	BaseSHA        string `json:"base_sha"`
	ConversationID string `json:"conversation_id"`
}

// writePrivate writes the private folder of the run directory dir.
func writePrivate(dir string, s chat.Seed, head string) error {
	priv := filepath.Join(dir, chat.PrivateDir)
	if err := os.MkdirAll(priv, 0o755); err != nil {
		return fmt.Errorf("write private folder: %w", err)
	}
	ctxJSON, err := json.MarshalIndent(SeedContext{
		Repository:     s.Repository.Name,
		PR:             s.Review.PR,
		Version:        s.Review.Version,
		HeadSHA:        head,
		BaseSHA:        s.Review.BaseSHA,
		ConversationID: s.Conversation.ID,
	}, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", ContextFile, err)
	}
	files := []struct{ name, text string }{
		// The folder ignores itself, so it never shows in git status.
		{".gitignore", "*\n"},
		{ReviewFile, RenderReview(s.Repository.Name, s.Review)},
		{TurnsFile, RenderTurns(s.Turns)},
		{ContextFile, string(ctxJSON) + "\n"},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(priv, f.name), []byte(f.text), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	return nil
}

// RenderReview renders a saved review (its markdown and its structured
// sections with their anchors) as one markdown document, the way a seeded
// run directory's review.md holds it.
func RenderReview(repo string, r chat.Review) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Review of %s pull request #%d (version %d)\n\n", repo, r.PR, r.Version)
	fmt.Fprintf(&b, "- Head commit: %s\n- Base commit: %s\n", r.HeadSHA, r.BaseSHA)
	if r.Backend != "" {
		fmt.Fprintf(&b, "- Reviewed by: %s", r.Backend)
		if r.Model != "" {
			fmt.Fprintf(&b, " (%s)", r.Model)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n## Review\n\n")
	if md := strings.TrimSpace(r.Markdown); md != "" {
		b.WriteString(md)
	} else {
		b.WriteString("(The review has no text.)")
	}
	b.WriteString("\n")
	if len(r.Sections) > 0 {
		b.WriteString("\n## Sections\n")
		for i, s := range r.Sections {
			title := cmp.Or(s.Title, s.ID, fmt.Sprintf("Section %d", i+1))
			fmt.Fprintf(&b, "\n### %s\n\n", title)
			if s.ID != "" {
				fmt.Fprintf(&b, "Section id: `%s`\n\n", s.ID)
			}
			if len(s.Anchors) > 0 {
				b.WriteString("Where:\n")
				for _, a := range s.Anchors {
					fmt.Fprintf(&b, "- %s\n", anchorText(a))
				}
				b.WriteString("\n")
			}
			if md := strings.TrimSpace(s.Markdown); md != "" {
				b.WriteString(md)
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}

// RenderTurns renders a conversation's earlier turns (question, focus,
// answer, citations, suggested fix) as one markdown document, the way a
// seeded run directory's turns.md holds them.
func RenderTurns(turns []chat.Turn) string {
	var b strings.Builder
	b.WriteString("# Earlier turns of this conversation\n")
	if len(turns) == 0 {
		b.WriteString("\nThere are no earlier turns: this is the conversation's first question.\n")
		return b.String()
	}
	for i, t := range turns {
		n := t.Number
		if n == 0 {
			n = i + 1
		}
		fmt.Fprintf(&b, "\n## Turn %d\n\n### Question\n\n%s\n", n, strings.TrimSpace(t.Question))
		if t.Focus != nil {
			fmt.Fprintf(&b, "\nAsked about: %s\n", focusText(*t.Focus))
		}
		b.WriteString("\n### Answer\n\n")
		if t.Answer == nil {
			fmt.Fprintf(&b, "(No answer; state: %s", cmp.Or(string(t.State), "unknown"))
			if t.Reason != "" {
				fmt.Fprintf(&b, ", reason: %s", t.Reason)
			}
			b.WriteString(".)\n")
			continue
		}
		b.WriteString(strings.TrimSpace(t.Answer.AnswerMarkdown))
		b.WriteString("\n")
		if len(t.Answer.Citations) > 0 {
			b.WriteString("\nCitations:\n")
			for _, c := range t.Answer.Citations {
				fmt.Fprintf(&b, "- %s\n", anchorText(chat.Anchor{Path: c.Path, StartLine: c.StartLine, EndLine: c.EndLine}))
			}
		}
		if t.Answer.SuggestsFix != nil {
			fmt.Fprintf(&b, "\nSuggested fix: %s\n", strings.TrimSpace(t.Answer.SuggestsFix.Summary))
		}
	}
	return b.String()
}

func focusText(f chat.Focus) string {
	s := cmp.Or(f.Kind, "the review")
	if f.ID != "" {
		s += " `" + f.ID + "`"
	}
	if len(f.Anchors) > 0 {
		parts := make([]string, len(f.Anchors))
		for i, a := range f.Anchors {
			parts[i] = anchorText(a)
		}
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

// anchorText renders an anchor as path, path:line or path:start-end,
// followed by "(base commit)" for lines of the base.
func anchorText(a chat.Anchor) string {
	s := fmt.Sprintf("`%s:%d-%d`", a.Path, a.StartLine, a.EndLine)
	switch {
	case a.StartLine <= 0:
		s = "`" + a.Path + "`"
	case a.EndLine <= a.StartLine:
		s = fmt.Sprintf("`%s:%d`", a.Path, a.StartLine)
	}
	if a.Side == chat.SideBase {
		s += " (base commit)"
	}
	return s
}
