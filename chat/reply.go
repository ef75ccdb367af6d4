package chat

import (
	"cmp"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// NoteCutShort is the note of a turn whose model stopped at its output
// token limit: its answer may be incomplete.
const NoteCutShort = "The model's reply was cut short at its output token limit."

// ReplyMarker is the hidden text a posted answer carries, so that a retry
// finds the reply an earlier attempt posted.
func ReplyMarker(turnID string) string {
	return "<!-- prchat:turn:" + turnID + " -->"
}

// RefusalBody is the reply to an accepted /ask that prchat could not
// answer: one sentence saying why, with the trace id that the logs name
// it by, and marker.
func RefusalBody(reason, trace, marker string) string {
	return "prchat could not answer this question: " + strings.TrimSuffix(reason, ".") + ". (trace " + trace + ")\n\n" + marker + "\n"
}

// ReplyInput is what an answer posted to a forge is made of.
type ReplyInput struct {
	Turn Turn
	// HTMLURL is the repository's web address; HeadSHA the review's head,
	// which citations link to.
	HTMLURL string
	HeadSHA string
	// Truncated says the model stopped at its output limit.
	Truncated bool
	// Forge makes the links to cited lines; nil: citations are not links.
	Forge Forge
	// Unreviewed says the PR had no recorded review: the answer was made
	// without a review's context, and the reply says so.
	Unreviewed bool
}

// reasonWords says in plain words why a turn failed.
var reasonWords = map[Reason]string{
	ReasonTimeout:            "the agent took longer than the time limit of a question",
	ReasonBudgetExceeded:     "the agent used up the model calls or tokens a question may use",
	ReasonInvalidAnswer:      "the agent's answer did not pass prchat's checks, also after it was asked to repair it",
	ReasonBackendUnavailable: "no agent backend that could answer was available",
	ReasonBackendError:       "the agent backend failed",
	ReasonNeedsClone:         "prchat could not get the pull request's commits into its clone of the repository",
	ReasonCancelled:          "the question was cancelled",
	ReasonInterrupted:        "prchat stopped while answering and gave up after several tries",
}

// ReplyBody is the markdown of the answer to a comment question: the
// answer, each citation as a link to the head commit's lines, the
// suggested fix, the note, and a footer (backend, session, time, cost); or,
// for a failed turn, why it failed. No line starts with "/", so that the
// reply never triggers prchat or another bot.
func ReplyBody(in ReplyInput) string {
	t := in.Turn
	var b strings.Builder
	switch {
	case t.State == StateSucceeded && t.Answer != nil:
		if in.Truncated {
			b.WriteString("> **This answer is incomplete**: the model stopped at its output limit. Ask again with a narrower question.\n\n")
		}
		b.WriteString(strings.TrimSpace(t.Answer.AnswerMarkdown))
		b.WriteString("\n")
		if len(t.Answer.Citations) > 0 {
			b.WriteString("\n**Cited**\n\n")
			for _, c := range t.Answer.Citations {
				fmt.Fprintf(&b, "* %s\n", citationLink(in, c))
			}
		}
		if t.Answer.SuggestsFix != nil {
			b.WriteString("\n**Suggested fix**\n\n")
			b.WriteString(strings.TrimSpace(t.Answer.SuggestsFix.Summary))
			b.WriteString("\n")
		}
	default:
		words, ok := reasonWords[t.Reason]
		if !ok {
			words = "it did not finish"
		}
		fmt.Fprintf(&b, "prchat could not answer this question: %s.\n", words)
		if t.State == StateCancelled {
			b.Reset()
			b.WriteString("This question was cancelled before it was answered.\n")
		}
	}
	if in.Unreviewed {
		fmt.Fprintf(&b, "\n> No review was recorded for this pull request, so %s answered from the code alone, without a review's context.\n", cmp.Or(t.Backend, "the default backend"))
	}
	if note := strings.TrimSpace(t.Note); note != "" {
		b.WriteString("\n> ")
		b.WriteString(strings.ReplaceAll(note, "\n", "\n> "))
		b.WriteString("\n")
	}
	b.WriteString("\n<sub>")
	b.WriteString(footer(t))
	b.WriteString("</sub>\n\n")
	b.WriteString(ReplyMarker(t.ID))
	b.WriteString("\n")
	return noSlashLines(b.String())
}

func citationLink(in ReplyInput, c Citation) string {
	label := fmt.Sprintf("`%s` lines %d–%d", strings.ReplaceAll(c.Path, "`", "'"), c.StartLine, c.EndLine)
	if c.StartLine == c.EndLine {
		label = fmt.Sprintf("`%s` line %d", strings.ReplaceAll(c.Path, "`", "'"), c.StartLine)
	}
	if in.Forge == nil || in.HTMLURL == "" || in.HeadSHA == "" {
		return label
	}
	return fmt.Sprintf("[%s](%s)", label, in.Forge.LineLink(in.HTMLURL, in.HeadSHA, c.Path, c.StartLine, c.EndLine))
}

// footer is the reply's last line: backend, how the session started, the
// time the answer took and its cost.
func footer(t Turn) string {
	parts := []string{"prchat"}
	if t.Backend != "" {
		parts = append(parts, t.Backend)
	}
	switch t.Session {
	case SessionForked:
		parts = append(parts, "forked the review's session")
	case SessionResumed:
		parts = append(parts, "resumed the conversation")
	case SessionSeeded:
		parts = append(parts, "seeded a new session")
	case SessionNone:
		parts = append(parts, "no session")
	}
	if t.StartedAt != nil && t.FinishedAt != nil {
		parts = append(parts, t.FinishedAt.Sub(*t.StartedAt).Round(100*time.Millisecond).String())
	}
	switch {
	case t.Usage.CostUSD != nil:
		parts = append(parts, fmt.Sprintf("$%.4f", *t.Usage.CostUSD))
	case t.Usage.CostReason != "":
		parts = append(parts, "cost unknown")
	}
	return strings.Join(parts, " · ")
}

// noSlashLines escapes every line that would start with "/" (after
// spaces): with a backslash outside code blocks, where markdown shows the
// slash alone, and a zero-width space inside them.
func noSlashLines(s string) string {
	lines := strings.Split(s, "\n")
	fenced := false
	for i, l := range lines {
		trimmed := strings.TrimLeftFunc(l, unicode.IsSpace)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fenced = !fenced
			continue
		}
		if !strings.HasPrefix(trimmed, "/") {
			continue
		}
		lead := l[:len(l)-len(trimmed)]
		if fenced {
			lines[i] = lead + "\u200b" + trimmed
		} else {
			lines[i] = lead + `\` + trimmed
		}
	}
	return strings.Join(lines, "\n")
}
