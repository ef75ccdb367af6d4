package agentsession

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/prchat/prchat/chat"
)

// Config configures Workspaces.
type Config struct {
	// DataDir is the folder that holds prchat's files on this host
	// (required). Run directories are made under DataDir/runs/<conversation
	// id>; repositories registered only by URL are cloned (as mirrors) under
	// DataDir/clones/<owner>/<name>.git; a registered clone path is read
	// through DataDir/local/<owner>/<name>.git (see Workspaces).
	DataDir string
	// Git is the git binary; default "git" from PATH.
	Git string
	// Secrets are the daemon's configured secret values: no variable
	// holding one reaches git (see Git.Secrets).
	Secrets []string
	// Logger receives what Workspaces does (sizes, paths, durations; never
	// review or answer text); default: discard.
	Logger *slog.Logger
	// LineCacheSize is how many line counts LineCount keeps; default 4096.
	LineCacheSize int
	// Credentials, if set, returns the user name and password that git
	// sends (as an HTTP Authorization header, never in a URL or argument)
	// when it clones or fetches a repository's https CloneURL; an empty
	// user means none (a forge's token for a private repository).
	Credentials func(ctx context.Context, repo chat.Repository) (user, password string, err error)
	// ClonePrivate lets git clone and fetch from hosts that resolve to
	// loopback, link-local or private addresses (PRCHAT_CLONE_ALLOW_PRIVATE);
	// otherwise each clone and fetch checks the host first (remoteGit).
	ClonePrivate bool
	// Resolver looks up clone hosts; default net.DefaultResolver.
	Resolver chat.Resolver
}

func (c *Config) validate() error {
	if c.DataDir == "" {
		return errors.New("agentsession: Config.DataDir is required")
	}
	if c.LineCacheSize < 0 {
		return fmt.Errorf("agentsession: Config.LineCacheSize %d is negative", c.LineCacheSize)
	}
	return nil
}

// Workspaces makes and removes the run directories agents work in, and
// counts the lines of files at a commit for citation checks. It implements
// chat.Workspaces and is safe for concurrent use.
//
// A run directory is a detached git worktree of the repository's clone at
// the review's head commit, plus the private folder chat.PrivateDir holding
// review.md (the saved review), turns.md (the conversation's earlier turns)
// and context.json (repository, PR, version, SHAs). The private folder
// ignores itself (a .gitignore of "*"), so git status in the worktree stays
// clean and nothing is written into the clone's shared exclude file.
//
// prchat never writes into a registered clone. A repository's ClonePath (a
// normal or bare repository) is read through a bare repository of
// prchat's own under DataDir/local whose objects/info/alternates names the
// clone's objects: it costs no copy, sees every commit of the clone, and
// the run directories are its worktrees, so `git worktree list` of the
// clone never changes. Otherwise the clone is a mirror of the CloneURL made
// once under DataDir/clones and fetched when a head commit is missing. A
// ClonePath that lacks the commit falls back to the mirror when there is a
// CloneURL.
type Workspaces struct {
	git          Git
	log          *slog.Logger
	runs         string // DataDir/runs
	clones       string // DataDir/clones
	local        string // DataDir/local
	lines        *lineCache
	creds        func(ctx context.Context, repo chat.Repository) (string, string, error)
	clonePrivate bool
	resolver     chat.Resolver

	mu      sync.Mutex
	locks   map[string]*sync.Mutex // per clone: worktree add/remove, clone, fetch
	objects map[string]string      // a registered clone's path -> its object folder
}

var (
	_ chat.Workspaces = (*Workspaces)(nil)
	_ chat.Clones     = (*Workspaces)(nil)
)

// NewWorkspaces returns Workspaces for cfg.
func NewWorkspaces(cfg Config) (*Workspaces, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	data, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("agentsession: data dir %s: %w", cfg.DataDir, err)
	}
	return &Workspaces{
		git:     Git{Path: cmp.Or(cfg.Git, "git"), Secrets: cfg.Secrets},
		log:     cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		runs:    filepath.Join(data, "runs"),
		clones:  filepath.Join(data, "clones"),
		local:   filepath.Join(data, "local"),
		lines:   newLineCache(cmp.Or(cfg.LineCacheSize, 4096)),
		locks:   map[string]*sync.Mutex{},
		objects: map[string]string{},
		creds:   cfg.Credentials,

		clonePrivate: cfg.ClonePrivate,
		resolver:     cfg.Resolver,
	}, nil
}

// shaPattern is a full or abbreviated commit id (SHA-1 or SHA-256).
var shaPattern = regexp.MustCompile(`^[0-9a-fA-F]{4,64}$`)

// Prepare makes the run directory of s.Conversation at s.Review.HeadSHA and
// returns its absolute path, DataDir/runs/<conversation id>. A run directory
// the conversation already had is replaced. A repository with no usable
// clone, or a head commit that is not in its clone, is a *chat.Error with
// chat.CodeNeedsClone.
func (w *Workspaces) Prepare(ctx context.Context, s chat.Seed) (string, error) {
	start := time.Now()
	id := s.Conversation.ID
	if err := checkRunName(id); err != nil {
		return "", fmt.Errorf("prepare run directory: conversation id: %w", err)
	}
	sha := s.Review.HeadSHA
	if !shaPattern.MatchString(sha) {
		return "", fmt.Errorf("prepare run directory for conversation %s: head %q is not a commit id", id, sha)
	}
	clone, full, err := w.findCommit(ctx, s.Repository, sha)
	if err != nil {
		return "", fmt.Errorf("prepare run directory for conversation %s: %w", id, err)
	}

	dir := filepath.Join(w.runs, id)
	if _, err := os.Lstat(dir); err == nil {
		if err := w.Remove(ctx, dir); err != nil {
			return "", fmt.Errorf("prepare run directory for conversation %s: replace the old one: %w", id, err)
		}
	}
	if err := os.MkdirAll(w.runs, 0o755); err != nil {
		return "", fmt.Errorf("prepare run directory for conversation %s: %w", id, err)
	}
	err = w.addWorktree(ctx, clone, dir, full)
	if err == nil {
		err = writePrivate(dir, s, full)
	}
	if err != nil {
		// A checkout cut short (by a timeout, say) leaves a half-made
		// worktree behind.
		if rerr := w.Remove(context.WithoutCancel(ctx), dir); rerr != nil {
			w.log.WarnContext(ctx, "remove half-made run directory", slog.String("dir", dir), slog.Any("error", rerr))
		}
		return "", fmt.Errorf("prepare run directory for conversation %s: %w", id, err)
	}
	w.log.InfoContext(ctx, "prepared run directory",
		slog.String("conversation", id),
		slog.String("repository", s.Repository.Name),
		slog.String("commit", full),
		slog.String("dir", dir),
		slog.Int("earlier_turns", len(s.Turns)),
		slog.Duration("took", time.Since(start)))
	return dir, nil
}

// Exists reports whether dir is still there as a directory.
func (w *Workspaces) Exists(dir string) bool {
	if dir == "" {
		return false
	}
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// Remove deletes a run directory made by Prepare: it removes the worktree
// from its clone (git worktree remove --force, git worktree prune) and then
// whatever is left of dir. It refuses any dir that is not directly under
// DataDir/runs. Removing a directory that is already gone is not an error.
func (w *Workspaces) Remove(ctx context.Context, dir string) error {
	abs, err := w.runDir(dir)
	if err != nil {
		return fmt.Errorf("remove run directory: %w", err)
	}
	if _, err := os.Lstat(abs); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if common, ok := w.worktreeClone(ctx, abs); ok {
		unlock := w.lock(common)
		// A worktree git cannot remove (half made, say) is deleted below
		// and its registration pruned.
		if _, err := w.git.Output(ctx, common, "worktree", "remove", "--force", "--force", abs); err != nil {
			w.log.DebugContext(ctx, "git worktree remove", slog.String("dir", abs), slog.Any("error", err))
			defer w.prune(ctx, common)
		}
		unlock()
	}
	if err := os.RemoveAll(abs); err != nil {
		return fmt.Errorf("remove run directory %s: %w", abs, err)
	}
	w.log.InfoContext(ctx, "removed run directory", slog.String("dir", abs))
	return nil
}

// runDir checks that dir is a directory directly under DataDir/runs and
// returns it cleaned and absolute.
func (w *Workspaces) runDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("empty path")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%s: %w", dir, err)
	}
	rel, err := filepath.Rel(w.runs, abs)
	if err != nil || rel == "." || !filepath.IsLocal(rel) || strings.ContainsRune(rel, filepath.Separator) {
		return "", fmt.Errorf("%s is not a run directory under %s", dir, w.runs)
	}
	return abs, nil
}

// checkRunName checks that a conversation id can name a run directory.
func checkRunName(id string) error {
	switch {
	case id == "":
		return errors.New("empty")
	case id == "." || id == "..", strings.ContainsAny(id, `/\`+"\x00"), !filepath.IsLocal(id):
		return fmt.Errorf("%q cannot name a directory", id)
	}
	return nil
}

// prune deletes the registrations of worktrees whose directories are gone
// from clone.
func (w *Workspaces) prune(ctx context.Context, clone string) {
	unlock := w.lock(clone)
	defer unlock()
	if _, err := w.git.Output(ctx, clone, "worktree", "prune"); err != nil {
		w.log.WarnContext(ctx, "git worktree prune", slog.String("clone", clone), slog.Any("error", err))
	}
}

// worktreeClone returns the clone (git common dir) that the worktree at dir
// belongs to, if dir is a linked worktree (its .git is a file). It reads
// the worktree's own files as git lays them out (gitrepository-layout: a
// .git file "gitdir: <admin dir>", whose commondir names the clone) and
// asks git only when they say something else.
func (w *Workspaces) worktreeClone(ctx context.Context, dir string) (string, bool) {
	fi, err := os.Lstat(filepath.Join(dir, ".git"))
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	if common, ok := readCommonDir(dir); ok {
		return common, true
	}
	out, err := w.git.Output(ctx, dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		w.log.DebugContext(ctx, "find the clone of a run directory", slog.String("dir", dir), slog.Any("error", err))
		return "", false
	}
	return filepath.Clean(strings.TrimSpace(string(out))), true
}

// readCommonDir reads the common git dir of the linked worktree at dir
// from its .git file and its admin dir's commondir file, as git writes
// them; false when they are not both there and pointing at a directory.
func readCommonDir(dir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, ".git"))
	if err != nil {
		return "", false
	}
	admin, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok || admin == "" {
		return "", false
	}
	if !filepath.IsAbs(admin) {
		admin = filepath.Join(dir, admin)
	}
	b, err = os.ReadFile(filepath.Join(admin, "commondir"))
	if err != nil {
		return "", false
	}
	common := strings.TrimSpace(string(b))
	if common == "" {
		return "", false
	}
	if !filepath.IsAbs(common) {
		common = filepath.Join(admin, common)
	}
	if fi, err := os.Stat(filepath.Join(common, "objects")); err != nil || !fi.IsDir() {
		return "", false
	}
	return filepath.Clean(common), true
}

// addWorktree adds a detached worktree of clone at commit in dir. Worktree
// changes to one clone are serialized in this process; a lock held by
// another process is retried a few times.
func (w *Workspaces) addWorktree(ctx context.Context, clone, dir, commit string) error {
	unlock := w.lock(clone)
	defer unlock()
	var err error
	pruned := false
	for attempt := range 4 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("add worktree of %s at %s: %w", clone, commit, ctx.Err())
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
			_ = os.RemoveAll(dir)
		}
		_, err = w.git.Output(ctx, clone, "worktree", "add", "--detach", "--quiet", dir, commit)
		var gerr *GitError
		if err == nil || ctx.Err() != nil || !errors.As(err, &gerr) {
			break
		}
		// A run directory deleted by hand leaves its worktree registered,
		// and git refuses to add a worktree at a registered path: prune
		// the registrations of gone directories, once, and add again.
		if strings.Contains(gerr.Stderr, "already registered") && !pruned {
			pruned = true
			if _, perr := w.git.Output(ctx, clone, "worktree", "prune"); perr != nil {
				w.log.WarnContext(ctx, "git worktree prune", slog.String("clone", clone), slog.Any("error", perr))
			}
			continue
		}
		if !strings.Contains(gerr.Stderr, ".lock") {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("add worktree of %s at %s: %w", clone, commit, err)
	}
	return nil
}

// lock locks the clone at path for worktree changes and fetches, and
// returns the unlock function.
func (w *Workspaces) lock(path string) func() {
	w.mu.Lock()
	m, ok := w.locks[path]
	if !ok {
		m = &sync.Mutex{}
		w.locks[path] = m
	}
	w.mu.Unlock()
	m.Lock()
	return m.Unlock
}
