package chat

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Clones checks repositories and commits when they are registered and
// recorded. Implemented by package agentsession.
type Clones interface {
	// CheckClone returns nil when path is the top of a git repository (a
	// work tree or a bare repository).
	CheckClone(ctx context.Context, path string) error
	// ResolveCommit returns the full id of commit sha in repo's clone,
	// fetching prchat's own mirror when the commit is missing. A commit
	// that is not there is an error wrapping ErrUnknownCommit.
	ResolveCommit(ctx context.Context, repo Repository, sha string) (string, error)
}

// ErrUnknownCommit means that a commit a review names is not in its
// repository's clone, even after a fetch. The API answers it with 422.
var ErrUnknownCommit = errors.New("commit is not in the repository's clone")

// Rate is a limit of Count events per Per, with bursts of up to Count. A
// zero Count means no limit.
type Rate struct {
	Count int
	Per   time.Duration
}

// Off reports whether the rate sets no limit.
func (r Rate) Off() bool { return r.Count <= 0 || r.Per <= 0 }

// RateLimiter counts events against limits that hold for the whole
// deployment (every API process). Implemented by package worker on Redis.
type RateLimiter interface {
	// Allow takes one event of key under limit at now. When the limit is
	// reached it takes nothing and returns how long until an event is
	// allowed again.
	Allow(ctx context.Context, key string, limit Rate, now time.Time) (retryAfter time.Duration, err error)
}

// RateLimited returns the error of a request refused by a rate limit:
// CodeRateLimited, with the wait in RetryAfter.
func RateLimited(what string, retryAfter time.Duration) *Error {
	return &Error{Code: CodeRateLimited, Message: fmt.Sprintf("too many %s; try again in %s", what, retryAfter.Round(time.Second)), RetryAfter: retryAfter}
}

// sees reports whether the request's token (if any) may see repo.
func sees(ctx context.Context, repo string) bool {
	t, ok := limitedToken(ctx)
	return !ok || t.Sees(repo)
}

func repositoryNotFound(name string) error {
	return Errorf(CodeRepositoryNotFound, "repository %s is not registered", name)
}

func conversationNotFound(id string) error {
	return Errorf(CodeNotFound, "conversation %s not found", id)
}

// conversationHead returns a conversation without its turns if the
// request's token may see it, else the error of a missing one.
func (s *Service) conversationHead(ctx context.Context, id string) (Conversation, error) {
	c, err := s.store.ConversationHead(ctx, id)
	if err == nil && !sees(ctx, c.Repository) {
		return Conversation{}, conversationNotFound(id)
	}
	return c, err
}

// seeConversation checks, for a token limited to some repositories, that
// the conversation is one of theirs. An unlimited token costs no query.
func (s *Service) seeConversation(ctx context.Context, id string) error {
	if _, ok := limitedToken(ctx); !ok {
		return nil
	}
	_, err := s.conversationHead(ctx, id)
	return err
}

// limitQuestion takes one question from the limits of the repository and
// of the request's token. Questions without a token (an API that is open
// because no token exists yet: a loopback daemon's own users) are not
// limited.
func (s *Service) limitQuestion(ctx context.Context, repo string) error {
	if _, ok := TokenFrom(ctx); s.limiter == nil || !ok {
		return nil
	}
	now := s.now()
	if !s.cfg.QuestionsPerRepo.Off() {
		wait, err := s.limiter.Allow(ctx, "repo:"+repo, s.cfg.QuestionsPerRepo, now)
		if err != nil {
			return fmt.Errorf("rate limit of %s: %w", repo, err)
		}
		if wait > 0 {
			return RateLimited("questions about "+repo, wait)
		}
	}
	if t, _ := TokenFrom(ctx); !s.cfg.QuestionsPerToken.Off() {
		wait, err := s.limiter.Allow(ctx, "token:"+t.ID, s.cfg.QuestionsPerToken, now)
		if err != nil {
			return fmt.Errorf("rate limit of token %s: %w", t.ID, err)
		}
		if wait > 0 {
			return RateLimited("questions with this token", wait)
		}
	}
	return nil
}

// checkRegistration checks a repository to register: its clone path is a
// git repository under an allowed root (stored with symbolic links
// resolved), its clone URL a transport that cannot read the host's files,
// to a host that does not resolve to a private address.
func (s *Service) checkRegistration(ctx context.Context, r *Repository) error {
	if r.ClonePath != "" {
		path, err := s.allowedPath(r.ClonePath, "clone_path")
		if err != nil {
			return err
		}
		if s.clones == nil {
			return Errorf(CodeUnavailable, "this server cannot check clones")
		}
		if err := s.clones.CheckClone(ctx, path); err != nil {
			return &Error{Code: CodeInvalid, Message: fmt.Sprintf("clone_path %s is not a git repository", r.ClonePath), Err: err}
		}
		r.ClonePath = path
	}
	if r.CloneURL != "" {
		if err := CheckCloneURL(r.CloneURL, s.cfg.AllowFileURLs); err != nil {
			return err
		}
		if !s.cfg.CloneAllowPrivate {
			// A host that cannot be looked up now is taken: the check
			// that counts is the one before git connects.
			if _, _, err := CheckCloneHost(ctx, nil, r.CloneURL); ErrorCode(err) == CodeInvalid {
				return err
			}
		}
	}
	return nil
}

// allowedPath returns path, absolute with its symbolic links resolved, if
// it is under one of the configured roots (or anywhere, when any path is
// allowed). field names the path in errors, which never name the roots.
func (s *Service) allowedPath(path, field string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", Errorf(CodeInvalid, "%s must be an absolute path", field)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(path))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", Errorf(CodeInvalid, "%s %s does not exist on the server", field, path)
		}
		return "", &Error{Code: CodeInvalid, Message: fmt.Sprintf("%s %s cannot be read on the server", field, path), Err: err}
	}
	if s.cfg.AnyPath {
		return real, nil
	}
	if len(s.cfg.ReposRoots) == 0 {
		return "", Errorf(CodeInvalid, "this server takes no %s: no repository roots are configured (PRCHAT_REPOS_ROOTS)", field)
	}
	for _, root := range s.cfg.ReposRoots {
		if rr, err := filepath.EvalSymlinks(root); err == nil {
			root = rr
		}
		if rel, err := filepath.Rel(root, real); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return real, nil
		}
	}
	return "", Errorf(CodeInvalid, "%s %s is not under a repository root of this server (PRCHAT_REPOS_ROOTS)", field, path)
}

// scpURL is git's scp-like syntax: [user@]host:path.
var scpURL = regexp.MustCompile(`^(?:[A-Za-z0-9._~-]+@)?[A-Za-z0-9.-]+:.+$`)

// CheckCloneURL checks that a clone URL uses a transport that reaches
// another host: https://, ssh:// or scp-like user@host:path. Any other
// (file://, a local path, ext::, git://, http://) is refused unless
// allowOther.
func CheckCloneURL(raw string, allowOther bool) error {
	if strings.HasPrefix(raw, "-") || strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return Errorf(CodeInvalid, "clone_url must not start with - or hold spaces or control characters")
	}
	if allowOther {
		return nil
	}
	refuse := Errorf(CodeInvalid, "clone_url must be an https://, ssh:// or user@host:path URL (other transports need PRCHAT_ALLOW_FILE_URLS=1 on the server)")
	if i := strings.Index(raw, "::"); i >= 0 && !strings.Contains(raw[:i], "://") {
		return refuse // git's transport::address syntax (ext::, fd::), not an IPv6 host
	}
	if i := strings.Index(raw, "://"); i >= 0 {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return refuse
		}
		switch strings.ToLower(u.Scheme) {
		case "https", "ssh", "git+ssh", "ssh+git":
			return nil
		}
		return refuse
	}
	// Without a scheme git takes host:path as scp-like, unless a slash
	// comes before the first colon (then it is a local path).
	colon := strings.IndexByte(raw, ':')
	if colon <= 0 || strings.ContainsAny(raw[:colon], `/\`) || !scpURL.MatchString(raw) {
		return refuse
	}
	return nil
}

// uuidPattern is a session id of Claude Code and Codex.
var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// plainID is a session id of other backends.
var plainID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// checkReview checks a review to record against its repository: its
// commits exist in the clone (stored as full ids), its run directory is
// under an allowed root, its session id has its backend's form.
func (s *Service) checkReview(ctx context.Context, rp Repository, r *Review) error {
	if r.SessionID != "" {
		pattern := plainID
		if r.Backend == BackendClaudeCode || r.Backend == BackendCodex {
			pattern = uuidPattern
		}
		if !pattern.MatchString(r.SessionID) {
			return Errorf(CodeInvalid, "session_id %q is not a session id of backend %q", r.SessionID, r.Backend)
		}
	}
	if r.RunDir != "" {
		if !filepath.IsAbs(r.RunDir) {
			return Errorf(CodeInvalid, "run_dir must be an absolute path")
		}
		r.RunDir = filepath.Clean(r.RunDir)
		// A run directory on another host cannot be looked at here: then
		// only its place is checked, and not even that for a session that
		// names no host to run in (its file is uploaded: the directory
		// only says which paths of the file to map to a worker's run
		// directory, and no agent ever runs in it).
		if _, err := os.Stat(r.RunDir); err == nil {
			real, err := s.allowedPath(r.RunDir, "run_dir")
			if err != nil {
				return err
			}
			r.RunDir = real
		} else if r.SessionHost != "" {
			if err := s.underRoots(r.RunDir); err != nil {
				return err
			}
		}
	}
	if rp.ClonePath == "" && rp.CloneURL == "" {
		return nil // nothing to check against; a question answers needs_clone
	}
	if s.clones == nil {
		return Errorf(CodeUnavailable, "this server cannot check commits")
	}
	for _, c := range []struct {
		field string
		sha   *string
	}{{"head_sha", &r.HeadSHA}, {"base_sha", &r.BaseSHA}} {
		if *c.sha == "" {
			continue
		}
		full, err := s.clones.ResolveCommit(ctx, rp, *c.sha)
		if err != nil {
			if errors.Is(err, ErrUnknownCommit) || ErrorCode(err) == CodeNeedsClone {
				return &Error{Code: CodeInvalid, Message: fmt.Sprintf("%s %s is not a commit of %s", c.field, *c.sha, rp.Name), Err: errors.Join(ErrUnknownCommit, err)}
			}
			return fmt.Errorf("check %s %s of %s: %w", c.field, *c.sha, rp.Name, err)
		}
		*c.sha = full
	}
	return nil
}

// underRoots checks a path that does not exist here lexically against the
// roots.
func (s *Service) underRoots(path string) error {
	if s.cfg.AnyPath {
		return nil
	}
	for _, root := range s.cfg.ReposRoots {
		if rel, err := filepath.Rel(root, path); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return nil
		}
	}
	return Errorf(CodeInvalid, "run_dir %s is not under a repository root of this server (PRCHAT_REPOS_ROOTS)", path)
}

// ParseRate reads a rate as settings write it: N/s, N/m or N/h (or N/<duration> such as N/10s); 0 is
// no limit.
func ParseRate(v string) (Rate, error) {
	if v == "0" || v == "" {
		return Rate{}, nil
	}
	n, per, ok := strings.Cut(v, "/")
	count, err := strconv.Atoi(n)
	if !ok || err != nil || count < 0 {
		return Rate{}, fmt.Errorf("not a rate such as 60/m: %q", v)
	}
	var d time.Duration
	switch per {
	case "s":
		d = time.Second
	case "m":
		d = time.Minute
	case "h":
		d = time.Hour
	default:
		if d, err = time.ParseDuration(per); err != nil || d <= 0 {
			return Rate{}, fmt.Errorf("not a rate such as 60/m: %q", v)
		}
	}
	return Rate{Count: count, Per: d}, nil
}
