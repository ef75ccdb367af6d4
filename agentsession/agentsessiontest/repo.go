package agentsessiontest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prchat/prchat/chat"
)

// Repo is a git repository made for a test by NewRepo.
type Repo struct {
	// Dir is the repository's work tree (a normal, non-bare repository).
	Dir string
	// Commits are the ids of its commits, oldest first.
	Commits []string
}

// Head returns the id of the repository's last commit.
func (r Repo) Head() string { return r.Commits[len(r.Commits)-1] }

// Repository returns the repository registered as name with Dir as its
// clone path.
func (r Repo) Repository(name string) chat.Repository {
	return chat.Repository{Name: name, ClonePath: r.Dir}
}

// Delete is the content that deletes a file when NewRepo is given it.
const Delete = "\x00delete\x00"

// NewRepo makes a git repository in a new temporary directory with one
// commit for each element of commits, on branch main. Each element maps
// slash-separated paths to contents; the content Delete deletes the file.
func NewRepo(t testing.TB, commits ...map[string]string) Repo {
	t.Helper()
	dir := t.TempDir()
	Git(t, dir, "init", "--quiet", "--initial-branch=main")
	r := Repo{Dir: dir}
	for i, files := range commits {
		for path, content := range files {
			full := filepath.Join(dir, filepath.FromSlash(path))
			if content == Delete {
				if err := os.Remove(full); err != nil {
					t.Fatalf("NewRepo: commit %d: %v", i+1, err)
				}
				continue
			}
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatalf("NewRepo: commit %d: %v", i+1, err)
			}
			if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
				t.Fatalf("NewRepo: commit %d: %v", i+1, err)
			}
		}
		Git(t, dir, "add", "--all")
		Git(t, dir, "commit", "--quiet", "--allow-empty", "-m", "commit "+string(rune('A'+i%26)))
		r.Commits = append(r.Commits, Git(t, dir, "rev-parse", "HEAD"))
	}
	return r
}

// Git runs git with args in dir for a test, isolated from the user's and
// the system's git configuration, and returns its output without the
// trailing newline. A failure fails the test.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=prchat test", "GIT_AUTHOR_EMAIL=test@prchat.invalid",
		"GIT_COMMITTER_NAME=prchat test", "GIT_COMMITTER_EMAIL=test@prchat.invalid",
		"GIT_TERMINAL_PROMPT=0",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSuffix(string(out), "\n")
}
