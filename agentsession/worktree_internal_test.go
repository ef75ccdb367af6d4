package agentsession

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadCommonDirAgreesWithGit: the clone a run directory belongs to,
// read from the worktree's files, is the one git names, for a worktree of
// a bare repository and of a normal one, with absolute and relative
// gitdir links; a .git file that leads nowhere is not read.
func TestReadCommonDirAgreesWithGit(t *testing.T) {
	t.Parallel()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	src := filepath.Join(t.TempDir(), "src")
	git("init", "--quiet", src)
	git("-C", src, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "--allow-empty", "-m", "one")
	bare := filepath.Join(t.TempDir(), "bare.git")
	git("clone", "--bare", "--quiet", src, bare)

	for name, c := range map[string]struct {
		repo     string
		relative bool // the .git file's link relative, as newer git can write it
	}{
		"bare":     {bare, false},
		"normal":   {src, false},
		"relative": {bare, true},
	} {
		dir := filepath.Join(t.TempDir(), name)
		git("-C", c.repo, "worktree", "add", "--detach", "--quiet", dir, "HEAD")
		if c.relative {
			admin := git("-C", dir, "rev-parse", "--path-format=absolute", "--git-dir")
			rel, err := filepath.Rel(dir, admin)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: "+rel+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want := git("-C", dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
		got, ok := readCommonDir(dir)
		if !ok || got != filepath.Clean(want) {
			t.Errorf("%s: readCommonDir = %q, %v; git says %q", name, got, ok, want)
		}
	}

	lost := t.TempDir()
	if err := os.WriteFile(filepath.Join(lost, ".git"), []byte("gitdir: "+filepath.Join(lost, "nowhere")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, ok := readCommonDir(lost); ok {
		t.Errorf("a .git file leading nowhere read as %q", got)
	}
}
