package openai

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
)

// commitID is a full or abbreviated commit id (SHA-1 or SHA-256): only hex
// digits, so that it can never be taken for an option.
var commitID = regexp.MustCompile(`^[0-9a-fA-F]{4,64}$`)

// gitDiff returns the PR's diff (base..head), for path p if it is set. It
// runs git diff in the run directory with no external diff, no textconv and
// no color; without a path, the diffstat comes first. The diff is cut at
// maxDiffBytes.
func (tb *toolbox) gitDiff(ctx context.Context, p string) (string, string, error) {
	switch {
	case tb.base == "":
		return "", "", toolErrorf("the review records no base commit, so there is no diff to show")
	case !commitID.MatchString(tb.base) || !commitID.MatchString(tb.head):
		return "", "", toolErrorf("the review's commits are not commit ids")
	}
	// The path may name a file the PR deleted, so it is checked as text
	// only; git reads the commits, not the checkout.
	rel, err := cleanPath(p)
	if err != nil {
		return "", "", err
	}
	args := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--find-renames"}
	pathspec := []string{"--", ":(literal)" + rel}
	if rel == "." {
		pathspec = nil
	}

	var out strings.Builder
	if rel == "." {
		stat, _, err := tb.gitOutput(ctx, maxStatBytes, append(append(args, "--stat=120"), tb.base, tb.head)...)
		if err != nil {
			return "", "", err
		}
		out.WriteString(stat)
		out.WriteString("\n")
	}
	diff, cut, err := tb.gitOutput(ctx, maxDiffBytes, append(append(args, tb.base, tb.head), pathspec...)...)
	if err != nil {
		return "", "", err
	}
	if strings.TrimSpace(diff) == "" {
		where := "the pull request"
		if rel != "." {
			where = rel
		}
		return fmt.Sprintf("No changes in %s between base %s and head %s.\n", where, short(tb.base), short(tb.head)),
			"no changes in " + rel, nil
	}
	out.WriteString(diff)
	files := strings.Count(diff, "\ndiff --git ")
	if strings.HasPrefix(diff, "diff --git ") {
		files++
	}
	summary := fmt.Sprintf("diff of %s: %s", rel, plural(files, "file", "files"))
	if cut {
		fmt.Fprintf(&out, "\n[the diff is cut at %d KB; ask for one path at a time]\n", maxDiffBytes>>10)
		summary += " (cut)"
	}
	return out.String(), summary, nil
}

// gitOutput runs git in the run directory and returns at most limit bytes
// of its standard output, and whether there was more.
func (tb *toolbox) gitOutput(ctx context.Context, limit int, args ...string) (string, bool, error) {
	cmd := tb.git.Cmd(ctx, tb.root, args...)
	stdout, stderr := &capped{limit: limit}, &capped{limit: 2000}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", false, ctx.Err()
		}
		return "", false, toolErrorf("git %s failed: %s", args[0], clip(strings.TrimSpace(stderr.buf.String()), 300))
	}
	return strings.ToValidUTF8(stdout.buf.String(), "\uFFFD"), stdout.cut, nil
}

// capped keeps the first limit bytes written to it and drops the rest.
type capped struct {
	limit int
	buf   bytes.Buffer
	cut   bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.limit - c.buf.Len()
	if len(p) > room {
		c.cut = true
	}
	if room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// short returns the first 12 characters of a commit id.
func short(sha string) string { return sha[:min(len(sha), 12)] }
