package agentsession_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/chat"
)

// twoCommits are the commits of the test repository: the PR's base and head.
var twoCommits = []map[string]string{
	{
		"main.go":   "package main\n\nfunc main() {}\n",
		"old.txt":   "gone at head\n",
		"docs/a.md": "# A\n",
	},
	{
		"main.go":        "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
		"old.txt":        agentsessiontest.Delete,
		"nonl.txt":       "one\ntwo\nthree",
		"empty.txt":      "",
		"pkg/lib/lib.go": "package lib\n",
	},
}

type fixture struct {
	repo agentsessiontest.Repo
	ws   *agentsession.Workspaces
	data string
}

func setup(t *testing.T) fixture {
	t.Helper()
	repo := agentsessiontest.NewRepo(t, twoCommits...)
	data := t.TempDir()
	ws, err := agentsession.NewWorkspaces(agentsession.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{repo: repo, ws: ws, data: data}
}

func seed(repo chat.Repository, conversation, head, base string) chat.Seed {
	return chat.Seed{
		Repository: repo,
		Review: chat.Review{
			Repository: repo.Name, PR: 42, Version: 2, HeadSHA: head, BaseSHA: base,
			Backend: "claude-code", Model: "opus",
			Markdown: "The loop in `main` never ends.",
			Sections: []chat.Section{{ID: "s1", Title: "Endless loop", Markdown: "See main.", Anchors: []chat.Anchor{{Path: "main.go", StartLine: 5, EndLine: 7}}}},
		},
		Conversation: chat.Conversation{ID: conversation},
		Turns: []chat.Turn{
			{Number: 1, State: chat.StateSucceeded, Question: "Why is it endless?",
				Answer: &chat.Answer{AnswerMarkdown: "Because of the `for {}`.",
					Citations:   []chat.Citation{{Path: "main.go", StartLine: 6, EndLine: 6}},
					SuggestsFix: &chat.Fix{Summary: "Add a break."}}},
			{Number: 2, State: chat.StateFailed, Reason: chat.ReasonTimeout, Question: "And the other loop?"},
		},
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPrepareAtHead(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repo := f.repo.Repository("acme/app")
	head, base := f.repo.Head(), f.repo.Commits[0]
	dir, err := f.ws.Prepare(t.Context(), seed(repo, "conv-1", head, base))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(f.data, "runs", "conv-1"); dir != want {
		t.Errorf("dir = %s, want %s", dir, want)
	}
	if got := agentsessiontest.Git(t, dir, "rev-parse", "HEAD"); got != head {
		t.Errorf("worktree HEAD = %s, want the head %s", got, head)
	}
	if got := readFile(t, filepath.Join(dir, "main.go")); got != twoCommits[1]["main.go"] {
		t.Errorf("main.go is not the head's:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "old.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old.txt, deleted at head, is in the worktree: %v", err)
	}
	if got := agentsessiontest.Git(t, dir, "status", "--porcelain", "--untracked-files=all"); got != "" {
		t.Errorf("git status in the run directory is not clean:\n%s", got)
	}
	if !f.ws.Exists(dir) {
		t.Error("Exists(dir) = false after Prepare")
	}

	priv := filepath.Join(dir, chat.PrivateDir)
	review := readFile(t, filepath.Join(priv, agentsession.ReviewFile))
	for _, want := range []string{"acme/app pull request #42 (version 2)", head, base, "The loop in `main` never ends.", "### Endless loop", "`main.go:5-7`", "See main."} {
		if !strings.Contains(review, want) {
			t.Errorf("review.md lacks %q:\n%s", want, review)
		}
	}
	turns := readFile(t, filepath.Join(priv, agentsession.TurnsFile))
	for _, want := range []string{"## Turn 1", "Why is it endless?", "Because of the `for {}`.", "`main.go:6`", "Suggested fix: Add a break.", "## Turn 2", "(No answer; state: failed, reason: timeout.)"} {
		if !strings.Contains(turns, want) {
			t.Errorf("turns.md lacks %q:\n%s", want, turns)
		}
	}
	var got agentsession.SeedContext
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(priv, agentsession.ContextFile))), &got); err != nil {
		t.Fatal(err)
	}
	want := agentsession.SeedContext{Repository: "acme/app", PR: 42, Version: 2, HeadSHA: head, BaseSHA: base, ConversationID: "conv-1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("context.json (-want +got):\n%s", diff)
	}
	// The clone's own status is untouched by the worktree.
	if got := agentsessiontest.Git(t, f.repo.Dir, "status", "--porcelain"); got != "" {
		t.Errorf("git status in the clone is not clean:\n%s", got)
	}
}

func TestPrepareAbbreviatedAndBase(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repo := f.repo.Repository("acme/app")
	base := f.repo.Commits[0]
	dir, err := f.ws.Prepare(t.Context(), seed(repo, "conv-base", base[:10], ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := agentsessiontest.Git(t, dir, "rev-parse", "HEAD"); got != base {
		t.Errorf("worktree HEAD = %s, want %s", got, base)
	}
	if got := readFile(t, filepath.Join(dir, "old.txt")); got != "gone at head\n" {
		t.Errorf("old.txt = %q, want the base's", got)
	}
	var ctxFile agentsession.SeedContext
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, chat.PrivateDir, agentsession.ContextFile))), &ctxFile); err != nil {
		t.Fatal(err)
	}
	if ctxFile.HeadSHA != base {
		t.Errorf("context.json head = %s, want the full id %s", ctxFile.HeadSHA, base)
	}
}

func TestPrepareReplacesOldRunDir(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repo := f.repo.Repository("acme/app")
	dir, err := f.ws.Prepare(t.Context(), seed(repo, "conv", f.repo.Commits[0], ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scratch"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := f.ws.Prepare(t.Context(), seed(repo, "conv", f.repo.Head(), ""))
	if err != nil {
		t.Fatal(err)
	}
	if again != dir {
		t.Errorf("second Prepare made %s, want %s", again, dir)
	}
	if got := agentsessiontest.Git(t, dir, "rev-parse", "HEAD"); got != f.repo.Head() {
		t.Errorf("HEAD = %s, want the new head", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "scratch")); !errors.Is(err, os.ErrNotExist) {
		t.Error("the old run directory's files survived")
	}
	if got := strings.Count(agentsessiontest.Git(t, f.repo.Dir, "worktree", "list", "--porcelain"), "worktree "); got != 1 {
		t.Errorf("the clone has %d worktrees, want 1: run directories are worktrees of prchat's own mirror", got)
	}
}

// TestPrepareNeverWritesIntoTheClone: run directories come from prchat's
// own bare repository under the data folder; the registered clone's
// worktree list and its files under .git stay as they were.
func TestPrepareNeverWritesIntoTheClone(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repo := f.repo.Repository("acme/app")
	before := agentsessiontest.Git(t, f.repo.Dir, "worktree", "list", "--porcelain")
	snapshot := gitDirFiles(t, f.repo.Dir)
	var dirs []string
	for i, sha := range []string{f.repo.Commits[0], f.repo.Head()} {
		dir, err := f.ws.Prepare(t.Context(), seed(repo, fmt.Sprintf("conv%d", i), sha, ""))
		if err != nil {
			t.Fatal(err)
		}
		if got := agentsessiontest.Git(t, dir, "rev-parse", "HEAD"); got != sha {
			t.Errorf("run directory HEAD = %s, want %s", got, sha)
		}
		dirs = append(dirs, dir)
	}
	if after := agentsessiontest.Git(t, f.repo.Dir, "worktree", "list", "--porcelain"); after != before {
		t.Errorf("the clone's worktree list changed:\n%s\nwas\n%s", after, before)
	}
	for _, d := range dirs {
		if err := f.ws.Remove(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(snapshot, gitDirFiles(t, f.repo.Dir)); diff != "" {
		t.Errorf("files under the clone's .git changed (-before +after):\n%s", diff)
	}
}

// gitDirFiles lists the files under dir/.git with their sizes and times.
func gitDirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	root := filepath.Join(dir, ".git")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files[strings.TrimPrefix(path, root)] = fmt.Sprintf("%d %s", info.Size(), info.ModTime())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestPrepareNeedsClone(t *testing.T) {
	t.Parallel()
	f := setup(t)
	missing := strings.Repeat("ab", 20)
	other := agentsessiontest.NewRepo(t, map[string]string{"x": "y\n"})
	tests := []struct {
		name string
		repo chat.Repository
		sha  string
		msg  string
	}{
		{"missing commit", f.repo.Repository("acme/app"), missing, "commit " + missing + " is not in the clone of acme/app"},
		{"missing commit, URL fetched", chat.Repository{Name: "acme/url", CloneURL: "file://" + f.repo.Dir}, missing, "commit " + missing + " is not in the clone of acme/url"},
		{"missing abbreviated commit", f.repo.Repository("acme/app"), "abcdef12", "commit abcdef12 is not in the clone of acme/app"},
		{"no clone", chat.Repository{Name: "acme/none"}, f.repo.Head(), "repository acme/none has no clone path or clone URL"},
		{"clone path not a repo", chat.Repository{Name: "acme/dir", ClonePath: t.TempDir()}, f.repo.Head(), "the clone path of acme/dir is not a git repository"},
		{"commit of another repo", other.Repository("acme/other"), f.repo.Head(), "is not in the clone of acme/other"},
		{"bad URL", chat.Repository{Name: "acme/bad", CloneURL: "file://" + filepath.Join(t.TempDir(), "nope")}, f.repo.Head(), "cannot clone acme/bad"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := f.ws.Prepare(t.Context(), seed(tt.repo, fmt.Sprintf("needs-%d", i), tt.sha, ""))
			if got := chat.ErrorCode(err); got != chat.CodeNeedsClone {
				t.Fatalf("Prepare = %v (code %s), want code needs_clone", err, got)
			}
			if msg := chat.ErrorMessage(err); !strings.Contains(msg, tt.msg) {
				t.Errorf("message = %q, want it to contain %q", msg, tt.msg)
			}
		})
	}
}

func TestPrepareRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repo := f.repo.Repository("acme/app")
	for _, s := range []chat.Seed{
		seed(repo, "", f.repo.Head(), ""),
		seed(repo, "../escape", f.repo.Head(), ""),
		seed(repo, "..", f.repo.Head(), ""),
		seed(repo, "ok", "HEAD", ""),
		seed(repo, "ok", "--upload-pack=x", ""),
	} {
		if dir, err := f.ws.Prepare(t.Context(), s); err == nil {
			t.Errorf("Prepare(conversation %q, head %q) = %s, want an error", s.Conversation.ID, s.Review.HeadSHA, dir)
		}
	}
}

func TestPrepareByCloneURL(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repo := chat.Repository{Name: "acme/remote", CloneURL: "file://" + f.repo.Dir}
	dir, err := f.ws.Prepare(t.Context(), seed(repo, "by-url", f.repo.Head(), ""))
	if err != nil {
		t.Fatal(err)
	}
	mirror := filepath.Join(f.data, "clones", "acme", "remote.git")
	if got := agentsessiontest.Git(t, mirror, "rev-parse", "--is-bare-repository"); got != "true" {
		t.Errorf("the clone at %s is not a bare mirror", mirror)
	}
	if got := agentsessiontest.Git(t, dir, "rev-parse", "HEAD"); got != f.repo.Head() {
		t.Errorf("HEAD = %s, want %s", got, f.repo.Head())
	}
	if n, err := f.ws.LineCount(t.Context(), repo, f.repo.Head(), "main.go"); err != nil || n != 7 {
		t.Errorf("LineCount(main.go) in the mirror = %d, %v; want 7", n, err)
	}

	// A commit made after the clone is fetched.
	agentsessiontest.Git(t, f.repo.Dir, "commit", "--quiet", "--allow-empty", "-m", "later")
	later := agentsessiontest.Git(t, f.repo.Dir, "rev-parse", "HEAD")
	dir2, err := f.ws.Prepare(t.Context(), seed(repo, "by-url-later", later, ""))
	if err != nil {
		t.Fatalf("Prepare at a commit made after the clone: %v", err)
	}
	if got := agentsessiontest.Git(t, dir2, "rev-parse", "HEAD"); got != later {
		t.Errorf("HEAD = %s, want %s", got, later)
	}
	if got := agentsessiontest.Git(t, dir2, "status", "--porcelain", "--untracked-files=all"); got != "" {
		t.Errorf("git status is not clean:\n%s", got)
	}
}

func TestPrepareFallsBackToURL(t *testing.T) {
	t.Parallel()
	f := setup(t)
	stale := agentsessiontest.NewRepo(t, map[string]string{"x": "y\n"})
	repo := chat.Repository{Name: "acme/both", ClonePath: stale.Dir, CloneURL: "file://" + f.repo.Dir}
	dir, err := f.ws.Prepare(t.Context(), seed(repo, "both", f.repo.Head(), ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := agentsessiontest.Git(t, dir, "rev-parse", "HEAD"); got != f.repo.Head() {
		t.Errorf("HEAD = %s, want %s", got, f.repo.Head())
	}
	if n, err := f.ws.LineCount(t.Context(), repo, f.repo.Head(), "nonl.txt"); err != nil || n != 3 {
		t.Errorf("LineCount through the fallback clone = %d, %v; want 3", n, err)
	}
}

func TestPrepareBareClonePath(t *testing.T) {
	t.Parallel()
	f := setup(t)
	bare := filepath.Join(t.TempDir(), "bare.git")
	agentsessiontest.Git(t, f.repo.Dir, "clone", "--quiet", "--bare", f.repo.Dir, bare)
	repo := chat.Repository{Name: "acme/bare", ClonePath: bare}
	dir, err := f.ws.Prepare(t.Context(), seed(repo, "bare", f.repo.Head(), ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := agentsessiontest.Git(t, dir, "status", "--porcelain", "--untracked-files=all"); got != "" {
		t.Errorf("git status is not clean:\n%s", got)
	}
	if err := f.ws.Remove(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(agentsessiontest.Git(t, bare, "worktree", "list", "--porcelain"), "worktree "); got != 1 {
		t.Errorf("the bare clone still lists %d worktrees after Remove, want 1", got)
	}
}

func TestConcurrentPrepare(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repos := []chat.Repository{
		f.repo.Repository("acme/app"),
		{Name: "acme/mirror", CloneURL: "file://" + f.repo.Dir},
	}
	const n = 6
	var wg sync.WaitGroup
	dirs := make([]string, 2*n)
	errs := make([]error, 2*n)
	for i := range 2 * n {
		wg.Go(func() {
			dirs[i], errs[i] = f.ws.Prepare(t.Context(), seed(repos[i%2], fmt.Sprintf("c%d", i), f.repo.Head(), ""))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Prepare %d: %v", i, err)
			continue
		}
		if _, err := os.Stat(filepath.Join(dirs[i], "main.go")); err != nil {
			t.Errorf("run directory %d: %v", i, err)
		}
	}
	// Remove them concurrently too.
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		wg.Go(func() {
			if err := f.ws.Remove(t.Context(), dir); err != nil {
				t.Errorf("Remove(%s): %v", dir, err)
			}
		})
	}
	wg.Wait()
	if got := strings.Count(agentsessiontest.Git(t, f.repo.Dir, "worktree", "list", "--porcelain"), "worktree "); got != 1 {
		t.Errorf("the clone lists %d worktrees after removing all, want 1", got)
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repo := f.repo.Repository("acme/app")
	dir, err := f.ws.Prepare(t.Context(), seed(repo, "to-remove", f.repo.Head(), ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.ws.Remove(t.Context(), dir); err != nil {
		t.Fatalf("Remove of a modified worktree: %v", err)
	}
	if f.ws.Exists(dir) {
		t.Error("Exists(dir) = true after Remove")
	}
	if got := agentsessiontest.Git(t, f.repo.Dir, "worktree", "list", "--porcelain"); strings.Contains(got, "to-remove") {
		t.Errorf("the clone still lists the worktree:\n%s", got)
	}
	if err := f.ws.Remove(t.Context(), dir); err != nil {
		t.Errorf("second Remove = %v, want nil", err)
	}

	// A run directory deleted by hand is pruned at the next Prepare.
	dir, err = f.ws.Prepare(t.Context(), seed(repo, "by-hand", f.repo.Head(), ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ws.Prepare(t.Context(), seed(repo, "by-hand", f.repo.Head(), "")); err != nil {
		t.Errorf("Prepare after the run directory was deleted by hand: %v", err)
	}

	// A leftover that is not a worktree is removed too.
	junk := filepath.Join(f.data, "runs", "junk")
	if err := os.MkdirAll(filepath.Join(junk, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.ws.Remove(t.Context(), junk); err != nil || f.ws.Exists(junk) {
		t.Errorf("Remove(junk) = %v, exists %v", err, f.ws.Exists(junk))
	}
}

func TestRemoveRefusesOutsideRuns(t *testing.T) {
	t.Parallel()
	f := setup(t)
	outside := t.TempDir()
	for _, dir := range []string{
		"",
		outside,
		f.data,
		filepath.Join(f.data, "runs"),
		filepath.Join(f.data, "clones"),
		filepath.Join(f.data, "runs", ".."),
		filepath.Join(f.data, "runs", "a", "..", "..", "clones"),
		filepath.Join(f.data, "runs", "a", "b"),
		f.repo.Dir,
	} {
		if err := f.ws.Remove(t.Context(), dir); err == nil {
			t.Errorf("Remove(%q) = nil, want a refusal", dir)
		}
	}
	if _, err := os.Stat(filepath.Join(f.repo.Dir, "main.go")); err != nil {
		t.Errorf("the repository was touched: %v", err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the outside folder was touched: %v", err)
	}
}

func TestLineCount(t *testing.T) {
	t.Parallel()
	f := setup(t)
	repo := f.repo.Repository("acme/app")
	head, base := f.repo.Head(), f.repo.Commits[0]
	tests := []struct {
		sha, path string
		want      int
		err       string
	}{
		{head, "main.go", 7, ""},
		{head[:7], "main.go", 7, ""},
		{strings.ToUpper(head), "main.go", 7, ""},
		{base, "main.go", 3, ""},
		{head, "nonl.txt", 3, ""},
		{head, "empty.txt", 0, ""},
		{head, "pkg/lib/lib.go", 1, ""},
		{base, "old.txt", 1, ""},
		{head, "old.txt", 0, "no such file"},
		{head, "missing.go", 0, "no such file"},
		{head, "pkg", 0, "directory"},
		{head, "pkg/lib", 0, "directory"},
		{head, "/etc/passwd", 0, "absolute"},
		{head, "../main.go", 0, "not a clean path"},
		{head, "pkg/../main.go", 0, "not a clean path"},
		{head, "./main.go", 0, "not a clean path"},
		{head, "", 0, "empty path"},
		{head, ".prchat/review.md", 0, "private folder"},
		{head, ".prchat", 0, "private folder"},
		{head, ".git/config", 0, ".git"},
		{head, "main.go\nHEAD:main.go", 0, "forbidden character"},
		{strings.Repeat("ab", 20), "main.go", 0, "no such file"},
		{"HEAD", "main.go", 0, "not a commit id"},
	}
	for _, tt := range tests {
		got, err := f.ws.LineCount(t.Context(), repo, tt.sha, tt.path)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("LineCount(%.8s, %q) = %v", tt.sha, tt.path, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("LineCount(%.8s, %q) = %d, %v; want an error with %q", tt.sha, tt.path, got, err, tt.err)
		case got != tt.want:
			t.Errorf("LineCount(%.8s, %q) = %d, want %d", tt.sha, tt.path, got, tt.want)
		}
	}

	// A clone that lost its file changes nothing for a cached count, since
	// commits do not change.
	if _, err := f.ws.LineCount(t.Context(), chat.Repository{Name: "acme/none"}, head, "main.go"); chat.ErrorCode(err) != chat.CodeNeedsClone {
		t.Errorf("LineCount without a clone = %v, want code needs_clone", err)
	}
}

func TestLineCountLargeFile(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n", 50_000) + "last"
	repo := agentsessiontest.NewRepo(t, map[string]string{"big.txt": big})
	ws, err := agentsession.NewWorkspaces(agentsession.Config{DataDir: t.TempDir(), LineCacheSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		n, err := ws.LineCount(t.Context(), repo.Repository("acme/big"), repo.Head(), "big.txt")
		if err != nil || n != 50_001 {
			t.Errorf("LineCount(big.txt) = %d, %v; want 50001", n, err)
		}
	}
}

func TestNewWorkspacesNeedsDataDir(t *testing.T) {
	t.Parallel()
	if _, err := agentsession.NewWorkspaces(agentsession.Config{}); err == nil {
		t.Error("NewWorkspaces without DataDir = nil error")
	}
}
