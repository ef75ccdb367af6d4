package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/chat"
)

// TestIndexKeptWithTheCheckout: the first question about a review head
// builds the index and saves it in the run directory's private folder;
// after the memory cache is gone, the next question loads it from there
// instead of building it again.
func TestIndexKeptWithTheCheckout(t *testing.T) {
	repo := agentsessiontest.NewRepo(t,
		map[string]string{"main.go": "package main\n\nfunc parseConfig() error { return nil }\n"},
		map[string]string{"main.go": "package main\n\nfunc parseConfig() error { return errEmpty }\n"})
	req := chat.RunRequest{Mode: chat.SessionNone, Dir: repo.Dir, Question: "Where is errEmpty declared?",
		Review: chat.Review{HeadSHA: repo.Head(), BaseSHA: repo.Commits[0]}}
	run := func() string {
		t.Helper()
		var summary string
		_, err := New(Config{}).Run(context.Background(), req, func(e chat.Event) {
			if e.Type == chat.EventToolResult && e.ToolName == "code_structure" {
				summary = e.Summary
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return summary
	}
	if s := run(); !strings.Contains(s, "indexed 1 source file") {
		t.Errorf("first question: summary %q, want the build", s)
	}
	file := indexFile(repo.Dir, repo.Head(), repo.Commits[0])
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the index is not kept with the checkout: %v", err)
	}
	if filepath.Dir(file) != filepath.Join(repo.Dir, chat.PrivateDir) {
		t.Errorf("index file %s is not in the private folder", file)
	}
	if s := run(); strings.Contains(s, "indexed") {
		t.Errorf("second question: summary %q, want no build", s)
	}
	sharedCache.mu.Lock()
	sharedCache.entries, sharedCache.order = nil, nil
	sharedCache.mu.Unlock()
	if s := run(); strings.Contains(s, "indexed") {
		t.Errorf("after a restart: summary %q, want the saved index", s)
	}
	// A checkout without a head commit is indexed again when it changes.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.py"), []byte("def one():\n    return 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req = chat.RunRequest{Mode: chat.SessionNone, Dir: dir, Question: "Where is two defined?"}
	if s := run(); !strings.Contains(s, "the structure does not answer it") {
		t.Errorf("before the change: %q", s)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.py"), []byte("def two():\n    return 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s := run(); !strings.Contains(s, "definition question about two") {
		t.Errorf("after the change: %q", s)
	}
}
