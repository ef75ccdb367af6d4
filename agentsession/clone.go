package agentsession

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prchat/prchat/chat"
)

// findCommit finds the clone of prchat's own that holds commit sha of
// repo and returns its path and the full commit id. prchat never writes
// into a registered clone: a ClonePath is read through a bare repository
// of prchat's under DataDir/local whose objects are the clone's (git
// alternates), and a CloneURL is cloned as a mirror under DataDir/clones
// and fetched when a commit is missing.
func (w *Workspaces) findCommit(ctx context.Context, repo chat.Repository, sha string) (clone, full string, err error) {
	if repo.ClonePath != "" {
		path, err := filepath.Abs(repo.ClonePath)
		if err != nil {
			return "", "", fmt.Errorf("clone path of %s: %w", repo.Name, err)
		}
		switch {
		case isRepo(path):
			local, err := w.localMirror(ctx, repo.Name, path)
			if err != nil {
				return "", "", err
			}
			full, ok, err := w.resolve(ctx, local, sha)
			if err != nil {
				return "", "", err
			}
			if ok {
				return local, full, nil
			}
			if repo.CloneURL == "" {
				return "", "", &chat.Error{Code: chat.CodeNeedsClone, Message: fmt.Sprintf("commit %s is not in the clone of %s", sha, repo.Name), Err: chat.ErrUnknownCommit}
			}
		case repo.CloneURL == "":
			return "", "", chat.Errorf(chat.CodeNeedsClone, "the clone path of %s is not a git repository", repo.Name)
		}
	}
	if repo.CloneURL == "" {
		return "", "", chat.Errorf(chat.CodeNeedsClone, "repository %s has no clone path or clone URL", repo.Name)
	}
	return w.mirrorCommit(ctx, repo, sha)
}

// CheckClone returns nil when path is the top of a git repository that git
// can read.
func (w *Workspaces) CheckClone(ctx context.Context, path string) error {
	if !isRepo(path) {
		return errors.New("not the top of a git repository")
	}
	if _, err := w.objectsDir(ctx, path); err != nil {
		return err
	}
	return nil
}

// ResolveCommit returns the full id of commit sha in repo's clone (fetching
// prchat's mirror of its CloneURL when needed). A commit that is not there
// is an error wrapping chat.ErrUnknownCommit.
func (w *Workspaces) ResolveCommit(ctx context.Context, repo chat.Repository, sha string) (string, error) {
	if !shaPattern.MatchString(sha) {
		return "", fmt.Errorf("%q is not a commit id: %w", sha, chat.ErrUnknownCommit)
	}
	_, full, err := w.findCommit(ctx, repo, sha)
	if err != nil && chat.ErrorCode(err) == chat.CodeNeedsClone && !errors.Is(err, chat.ErrUnknownCommit) {
		err = errors.Join(err, chat.ErrUnknownCommit)
	}
	return full, err
}

// objectsDir returns the object folder of the repository at path (its
// common git dir's objects), asking git, which reads and writes nothing
// else.
func (w *Workspaces) objectsDir(ctx context.Context, path string) (string, error) {
	out, err := w.git.Output(ctx, path, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return "", fmt.Errorf("read the repository: %w", err)
	}
	dir := filepath.Join(filepath.Clean(strings.TrimSpace(string(out))), "objects")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", errors.New("the repository has no object folder")
	}
	return dir, nil
}

// cloneObjects is objectsDir of a registered clone, remembered for as long
// as that folder is there: every new conversation's checkout needs it, and
// asking git is a process each time.
func (w *Workspaces) cloneObjects(ctx context.Context, path string) (string, error) {
	w.mu.Lock()
	objects, ok := w.objects[path]
	w.mu.Unlock()
	if ok {
		if fi, err := os.Stat(objects); err == nil && fi.IsDir() {
			return objects, nil
		}
	}
	objects, err := w.objectsDir(ctx, path)
	if err != nil {
		return "", err
	}
	w.mu.Lock()
	w.objects[path] = objects
	w.mu.Unlock()
	return objects, nil
}

// localMirror returns prchat's bare repository for the clone at path,
// DataDir/local/<owner>/<name>.git, made on first use: an empty bare
// repository whose objects/info/alternates names the clone's object
// folder, so it sees every commit of the clone without copying it, and run
// directories are its worktrees, not the clone's. A repository registered
// again with another clone path gets its alternates rewritten.
func (w *Workspaces) localMirror(ctx context.Context, name, path string) (string, error) {
	mirror, err := w.namedPath(w.local, name)
	if err != nil {
		return "", err
	}
	objects, err := w.cloneObjects(ctx, path)
	if err != nil {
		return "", &chat.Error{Code: chat.CodeNeedsClone, Message: fmt.Sprintf("the clone of %s cannot be read", name), Err: err}
	}
	unlock := w.lock(mirror)
	defer unlock()
	alternates := filepath.Join(mirror, "objects", "info", "alternates")
	if b, err := os.ReadFile(alternates); err == nil && isRepo(mirror) {
		if strings.TrimSpace(string(b)) == objects {
			return mirror, nil
		}
		if err := os.WriteFile(alternates, []byte(objects+"\n"), 0o644); err != nil {
			return "", fmt.Errorf("point the mirror of %s at its clone: %w", name, err)
		}
		return mirror, nil
	}
	parent := filepath.Dir(mirror)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("mirror %s: %w", name, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(mirror)+".tmp-")
	if err != nil {
		return "", fmt.Errorf("mirror %s: %w", name, err)
	}
	defer os.RemoveAll(tmp)
	if _, err := w.git.Output(ctx, "", "init", "--bare", "--quiet", tmp); err != nil {
		return "", fmt.Errorf("mirror %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "objects", "info", "alternates"), []byte(objects+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("mirror %s: %w", name, err)
	}
	_ = os.RemoveAll(mirror) // a half-made one
	if err := os.Rename(tmp, mirror); err != nil {
		return "", fmt.Errorf("mirror %s: %w", name, err)
	}
	w.log.InfoContext(ctx, "made the local mirror of a clone", slog.String("repository", name), slog.String("mirror", mirror))
	return mirror, nil
}

// mirrorCommit finds sha in the mirror of repo's CloneURL under
// DataDir/clones, cloning the mirror if there is none and fetching it if
// the commit is missing.
func (w *Workspaces) mirrorCommit(ctx context.Context, repo chat.Repository, sha string) (clone, full string, err error) {
	path, err := w.mirrorPath(repo.Name)
	if err != nil {
		return "", "", err
	}
	unlock := w.lock(path)
	defer unlock()
	if !isRepo(path) {
		if err := w.cloneMirror(ctx, repo, path); err != nil {
			return "", "", err
		}
	}
	full, ok, err := w.resolve(ctx, path, sha)
	if err != nil || ok {
		return path, full, err
	}
	start := time.Now()
	git, err := w.remoteGit(ctx, repo)
	if err != nil {
		return "", "", err
	}
	_, fetchErr := git.Output(ctx, path, "fetch", "--quiet", "--prune", "origin")
	if fetchErr != nil {
		if ctx.Err() != nil {
			return "", "", fmt.Errorf("fetch %s: %w", repo.Name, fetchErr)
		}
		w.log.WarnContext(ctx, "git fetch", slog.String("repository", repo.Name), slog.Any("error", fetchErr))
	} else {
		w.log.InfoContext(ctx, "fetched clone", slog.String("repository", repo.Name), slog.Duration("took", time.Since(start)))
	}
	if full, ok, err = w.resolve(ctx, path, sha); err != nil || ok {
		return path, full, err
	}
	// A commit no ref reaches (an old PR head) can still be fetched by its
	// full id where the server allows it.
	if len(sha) == 40 || len(sha) == 64 {
		if _, ferr := git.Output(ctx, path, "fetch", "--quiet", "origin", sha); ferr != nil {
			w.log.DebugContext(ctx, "git fetch commit", slog.String("repository", repo.Name), slog.Any("error", ferr))
		}
		if full, ok, err = w.resolve(ctx, path, sha); err != nil || ok {
			return path, full, err
		}
	}
	return "", "", &chat.Error{
		Code:    chat.CodeNeedsClone,
		Message: fmt.Sprintf("commit %s is not in the clone of %s", sha, repo.Name),
		Err:     errors.Join(chat.ErrUnknownCommit, fetchErr), // and why the fetch did not bring it, if it failed
	}
}

// cloneMirror clones repo's CloneURL as a mirror into path. It clones into a
// temporary folder first and renames it into place, so that a clone cut
// short never looks like a clone.
func (w *Workspaces) cloneMirror(ctx context.Context, repo chat.Repository, path string) error {
	parent := filepath.Dir(path)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("clone %s: %w", repo.Name, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("clone %s: %w", repo.Name, err)
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	git, err := w.remoteGit(ctx, repo)
	if err != nil {
		return err
	}
	if _, err := git.Output(ctx, "", "clone", "--mirror", "--quiet", "--", repo.CloneURL, tmp); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("clone %s: %w", repo.Name, err)
		}
		return &chat.Error{Code: chat.CodeNeedsClone, Message: fmt.Sprintf("cannot clone %s from its clone URL", repo.Name), Err: err}
	}
	if err := os.Rename(tmp, path); err != nil {
		if isRepo(path) { // another process cloned it meanwhile
			return nil
		}
		return fmt.Errorf("clone %s: %w", repo.Name, err)
	}
	w.log.InfoContext(ctx, "cloned repository", slog.String("repository", repo.Name), slog.String("clone", path), slog.Duration("took", time.Since(start)))
	return nil
}

// mirrorPath is where the mirror of the repository named owner/name lives.
func (w *Workspaces) mirrorPath(name string) (string, error) {
	return w.namedPath(w.clones, name)
}

// namedPath is the folder <owner>/<name>.git of the repository named
// owner/name under dir.
func (w *Workspaces) namedPath(dir, name string) (string, error) {
	owner, repo, ok := strings.Cut(name, "/")
	if !ok || !safeName(owner) || !safeName(repo) {
		return "", chat.Errorf(chat.CodeNeedsClone, "repository name %q is not owner/name, so it cannot be cloned", name)
	}
	return filepath.Join(dir, owner, repo+".git"), nil
}

// safeName reports whether s can name a folder: no separators, not . or ..,
// nothing but letters, digits and ._-.
func safeName(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// resolve returns the full id of commit sha in clone, and false when the
// clone has no such commit (or sha is ambiguous there).
func (w *Workspaces) resolve(ctx context.Context, clone, sha string) (string, bool, error) {
	out, err := w.git.Output(ctx, clone, "rev-parse", "--verify", "--quiet", sha+"^{commit}")
	if err != nil {
		var gerr *GitError
		if ctx.Err() == nil && errors.As(err, &gerr) && gerr.ExitCode > 0 {
			return "", false, nil
		}
		return "", false, fmt.Errorf("look up commit %s in %s: %w", sha, clone, err)
	}
	return strings.TrimSpace(string(out)), true, nil
}

// isRepo reports whether path is the top of a git repository: a work tree
// with .git, or a bare repository. It does not look in parent folders, as
// git would.
func isRepo(path string) bool {
	if _, err := os.Stat(filepath.Join(path, ".git")); err == nil {
		return true
	}
	for _, name := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Stat(filepath.Join(path, name)); err != nil {
			return false
		}
	}
	return true
}

// remoteGit is the git that clones and fetches repo: with the repository's
// credentials (Config.Credentials, which decides for which hosts) as an
// Authorization header, for an http(s) CloneURL only; and, unless
// Config.ClonePrivate, only after the URL's host was resolved and found to
// be no loopback, link-local or private address (chat.CheckCloneHost),
// right before git connects. For http(s) git is then pinned to the
// addresses checked (http.curloptResolve) and follows no redirect, so a
// name that resolves elsewhere for git than for the check (DNS rebinding),
// or a redirect, cannot lead it to a private address. ssh and git:// are
// checked, not pinned: git's ssh resolves the name itself (see the README).
func (w *Workspaces) remoteGit(ctx context.Context, repo chat.Repository) (Git, error) {
	var config []string // key, value pairs for GIT_CONFIG_*
	if !w.clonePrivate {
		ep, addrs, err := chat.CheckCloneHost(ctx, w.resolver, repo.CloneURL)
		var unresolved *chat.ErrUnresolved
		switch {
		case errors.As(err, &unresolved):
			if !proxied(ep) {
				return Git{}, &chat.Error{Code: chat.CodeNeedsClone, Message: fmt.Sprintf("cannot look up the host of %s's clone URL", repo.Name), Err: err}
			}
			// Behind a proxy only the proxy may resolve names: it connects.
		case err != nil:
			return Git{}, &chat.Error{Code: chat.CodeNeedsClone, Message: fmt.Sprintf("the clone URL of %s leads to a private address: %s", repo.Name, chat.ErrorMessage(err)), Err: err}
		case len(addrs) > 0 && (ep.Scheme == "https" || ep.Scheme == "http"):
			config = append(config, pin(ep, addrs)...)
		}
	}
	if w.creds != nil && (strings.HasPrefix(repo.CloneURL, "https://") || strings.HasPrefix(repo.CloneURL, "http://")) {
		user, password, err := w.creds(ctx, repo)
		if err != nil {
			return Git{}, &chat.Error{Code: chat.CodeNeedsClone, Message: fmt.Sprintf("cannot get the credentials to fetch %s", repo.Name), Err: err}
		}
		if user != "" {
			basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
			config = append(config, "http.extraHeader", "Authorization: Basic "+basic)
		}
	}
	return withConfig(w.git, config), nil
}

// pin is the git configuration (key, value pairs) that makes git's HTTP
// connect to ep only at addrs, and follow no redirect elsewhere.
func pin(ep chat.CloneEndpoint, addrs []netip.Addr) []string {
	pinned := make([]string, len(addrs))
	for i, a := range addrs {
		pinned[i] = a.Unmap().String()
		if a.Unmap().Is6() {
			pinned[i] = "[" + pinned[i] + "]"
		}
	}
	return []string{"http.curloptResolve", ep.Host + ":" + ep.Port + ":" + strings.Join(pinned, ","), "http.followRedirects", "false"}
}

// withConfig returns g with config (key, value pairs) set through
// GIT_CONFIG_* variables, which git never prints.
func withConfig(g Git, config []string) Git {
	if len(config) == 0 {
		return g
	}
	g.Env = slices.Clone(g.Env)
	g.Env = append(g.Env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(config)/2))
	for i := 0; i < len(config); i += 2 {
		g.Env = append(g.Env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i/2, config[i]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i/2, config[i+1]))
	}
	return g
}

// proxied reports whether git reaches ep through a proxy of the
// environment (which then resolves its name).
func proxied(ep chat.CloneEndpoint) bool {
	names := []string{"ALL_PROXY", "all_proxy"}
	switch ep.Scheme {
	case "https":
		names = append(names, "HTTPS_PROXY", "https_proxy")
	case "http":
		names = append(names, "http_proxy", "HTTP_PROXY")
	default:
		return false
	}
	for _, n := range names {
		if os.Getenv(n) != "" {
			return true
		}
	}
	return false
}
