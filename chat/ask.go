package chat

import (
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Limits on what a client may send.
const (
	MaxQuestionRunes = 4000
	MaxAnchors       = 20
	maxPathBytes     = 1024
	maxFocusIDBytes  = 200
	maxModelBytes    = 200
	maxSections      = 500
	maxReviewBytes   = 1 << 20
)

// Ask is a question about a review: the first of a conversation or the next.
type Ask struct {
	Question string `json:"question"`
	Focus    *Focus `json:"focus"`
	// Provider and Model, if set, override the conversation's backend and
	// model for this turn.
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// Validate checks the question and focus against the limits of the contract.
func (a Ask) Validate() error {
	if !utf8.ValidString(a.Question) {
		return Errorf(CodeInvalid, "question is not valid UTF-8")
	}
	if strings.ContainsRune(a.Question, 0) {
		return Errorf(CodeInvalid, "question must not hold NUL bytes")
	}
	if strings.TrimSpace(a.Question) == "" {
		return Errorf(CodeInvalid, "question is empty")
	}
	if n := utf8.RuneCountInString(a.Question); n > MaxQuestionRunes {
		return Errorf(CodeInvalid, "question has %d characters; at most %d are allowed", n, MaxQuestionRunes)
	}
	if len(a.Model) > maxModelBytes || !utf8.ValidString(a.Model) {
		return Errorf(CodeInvalid, "model name is too long or not valid UTF-8")
	}
	if a.Focus != nil {
		if err := a.Focus.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks the focus kind, id and anchors.
func (f *Focus) Validate() error {
	switch f.Kind {
	case FocusSection, FocusStop, FocusOverview:
	default:
		return Errorf(CodeInvalid, "focus.kind must be section, stop or overview, not %q", f.Kind)
	}
	if len(f.ID) > maxFocusIDBytes || !utf8.ValidString(f.ID) {
		return Errorf(CodeInvalid, "focus.id is too long or not valid UTF-8")
	}
	if len(f.Anchors) > MaxAnchors {
		return Errorf(CodeInvalid, "focus has %d anchors; at most %d are allowed", len(f.Anchors), MaxAnchors)
	}
	for i, a := range f.Anchors {
		if err := a.Validate(); err != nil {
			return Errorf(CodeInvalid, "focus.anchors[%d]: %s", i, ErrorMessage(err))
		}
	}
	return nil
}

// Validate checks that an anchor names a repo-relative path, sane lines and
// a side.
func (a Anchor) Validate() error {
	if err := CheckRepoPath(a.Path); err != nil {
		return err
	}
	if a.StartLine < 0 || a.EndLine < 0 {
		return Errorf(CodeInvalid, "lines must be positive")
	}
	if a.EndLine != 0 && a.EndLine < a.StartLine {
		return Errorf(CodeInvalid, "end_line %d is before start_line %d", a.EndLine, a.StartLine)
	}
	switch a.Side {
	case "", SideHead, SideBase:
	default:
		return Errorf(CodeInvalid, "side must be %q (the default: lines of the head commit) or %q (lines of the base commit)", SideHead, SideBase)
	}
	return nil
}

// CheckRepoPath returns an error unless p is a clean repo-relative path:
// not empty, not absolute, no "." or ".." segments, no backslashes or NULs.
func CheckRepoPath(p string) error {
	switch {
	case p == "":
		return Errorf(CodeInvalid, "path is empty")
	case len(p) > maxPathBytes:
		return Errorf(CodeInvalid, "path is longer than %d bytes", maxPathBytes)
	case !utf8.ValidString(p):
		return Errorf(CodeInvalid, "path is not valid UTF-8")
	case strings.ContainsAny(p, "\\\x00"):
		return Errorf(CodeInvalid, "path %q has a backslash or NUL", p)
	case strings.HasPrefix(p, "/"):
		return Errorf(CodeInvalid, "path %q is absolute; it must be relative to the repository", p)
	case path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return Errorf(CodeInvalid, "path %q is not a clean repository-relative path", p)
	}
	return nil
}

var (
	repoNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$`)
	shaPattern      = regexp.MustCompile(`^[0-9a-f]{7,64}$`)
)

// CheckRepoName returns an error unless name is owner/repo.
func CheckRepoName(name string) error {
	if !repoNamePattern.MatchString(name) || strings.Contains(name, "..") {
		return Errorf(CodeInvalid, "repository name %q must be owner/repo", name)
	}
	return nil
}

// workerIDPattern is a worker id (PRCHAT_WORKER_ID, by default a host
// name), as a review's session_host names one.
var workerIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,253}$`)

// Validate checks a review before it is recorded. known lists the backend
// names this daemon accepts.
func (r *Review) Validate(known []string) error {
	if r.PR < 1 {
		return Errorf(CodeInvalid, "pull request number must be positive")
	}
	if !shaPattern.MatchString(r.HeadSHA) {
		return Errorf(CodeInvalid, "head_sha must be a hex commit id")
	}
	if r.BaseSHA != "" && !shaPattern.MatchString(r.BaseSHA) {
		return Errorf(CodeInvalid, "base_sha must be a hex commit id")
	}
	if r.Backend != "" && !slices.Contains(known, r.Backend) {
		return Errorf(CodeUnsupportedBackend, "backend %q is not supported; use one of %s", r.Backend, strings.Join(known, ", "))
	}
	if len(r.Markdown) > maxReviewBytes || !utf8.ValidString(r.Markdown) {
		return Errorf(CodeInvalid, "markdown must be valid UTF-8 of at most %d bytes", maxReviewBytes)
	}
	for _, s := range []string{r.Model, r.SessionID, r.SessionHost, r.RunDir} {
		if len(s) > maxPathBytes || !utf8.ValidString(s) {
			return Errorf(CodeInvalid, "model, session_id, session_host and run_dir must be valid UTF-8 of at most %d bytes", maxPathBytes)
		}
	}
	if r.SessionHost != "" && !workerIDPattern.MatchString(r.SessionHost) {
		return Errorf(CodeInvalid, "session_host must be a worker id: letters, digits, '.', '-' and '_', at most 253 of them")
	}
	if len(r.Sections) > maxSections {
		return Errorf(CodeInvalid, "a review has at most %d sections", maxSections)
	}
	for i, s := range r.Sections {
		if s.ID == "" || len(s.ID) > maxFocusIDBytes {
			return Errorf(CodeInvalid, "sections[%d].id must be 1..%d bytes", i, maxFocusIDBytes)
		}
		for j, a := range s.Anchors {
			if err := a.Validate(); err != nil {
				return Errorf(CodeInvalid, "sections[%d].anchors[%d]: %s", i, j, ErrorMessage(err))
			}
		}
	}
	return nil
}

// Title returns the first words of a question, for a conversation's title.
func Title(question string) string {
	const max = 80
	q := strings.Join(strings.Fields(question), " ")
	if utf8.RuneCountInString(q) <= max {
		return q
	}
	r := []rune(q)[:max]
	if i := strings.LastIndexByte(string(r), ' '); i > max/2 {
		return string(r)[:i] + "…"
	}
	return string(r) + "…"
}
