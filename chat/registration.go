package chat

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// checkRegistration checks a repository to register: its clone path is a
// git repository under an allowed root (stored with symbolic links
// resolved), its clone URL a transport that cannot read the host's files,
// to a host that does not resolve to a private address.
func (a *Admin) checkRegistration(ctx context.Context, r *Repository) error {
	if r.ClonePath != "" {
		path, err := a.roots.allowedPath(r.ClonePath, "clone_path")
		if err != nil {
			return err
		}
		if a.clones == nil {
			return Errorf(CodeUnavailable, "this server cannot check clones")
		}
		if err := a.clones.CheckClone(ctx, path); err != nil {
			return &Error{Code: CodeInvalid, Message: fmt.Sprintf("clone_path %s is not a git repository", r.ClonePath), Err: err}
		}
		r.ClonePath = path
	}
	if r.CloneURL != "" {
		if err := CheckCloneURL(r.CloneURL, a.cfg.AllowFileURLs); err != nil {
			return err
		}
		if !a.cfg.CloneAllowPrivate {
			// A host that cannot be looked up now is taken: the check
			// that counts is the one before git connects.
			if _, _, err := CheckCloneHost(ctx, nil, r.CloneURL); ErrorCode(err) == CodeInvalid {
				return err
			}
		}
	}
	return nil
}

// repoRoots are the folders under which clone paths and review run
// directories may lie; any allows any path.
type repoRoots struct {
	roots []string
	any   bool
}

// allowedPath returns path, absolute with its symbolic links resolved, if
// it is under one of the configured roots (or anywhere, when any path is
// allowed). field names the path in errors, which never name the roots.
func (rr repoRoots) allowedPath(path, field string) (string, error) {
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
	if rr.any {
		return real, nil
	}
	if len(rr.roots) == 0 {
		return "", Errorf(CodeInvalid, "this server takes no %s: no repository roots are configured (PRCHAT_REPOS_ROOTS)", field)
	}
	for _, root := range rr.roots {
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
func (a *Admin) checkReview(ctx context.Context, rp Repository, r *Review) error {
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
			real, err := a.roots.allowedPath(r.RunDir, "run_dir")
			if err != nil {
				return err
			}
			r.RunDir = real
		} else if r.SessionHost != "" {
			if err := a.roots.underRoots(r.RunDir); err != nil {
				return err
			}
		}
	}
	if rp.ClonePath == "" && rp.CloneURL == "" {
		return nil // nothing to check against; a question answers needs_clone
	}
	if a.clones == nil {
		return Errorf(CodeUnavailable, "this server cannot check commits")
	}
	for _, c := range []struct {
		field string
		sha   *string
	}{{"head_sha", &r.HeadSHA}, {"base_sha", &r.BaseSHA}} {
		if *c.sha == "" {
			continue
		}
		full, err := a.clones.ResolveCommit(ctx, rp, *c.sha)
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
func (rr repoRoots) underRoots(path string) error {
	if rr.any {
		return nil
	}
	for _, root := range rr.roots {
		if rel, err := filepath.Rel(root, path); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return nil
		}
	}
	return Errorf(CodeInvalid, "run_dir %s is not under a repository root of this server (PRCHAT_REPOS_ROOTS)", path)
}
