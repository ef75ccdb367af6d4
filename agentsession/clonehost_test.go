package agentsession_test

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/chat"
)

// dumbGitServer serves a bare copy of repo over git's dumb HTTP protocol on
// a loopback port, counting the requests it gets.
func dumbGitServer(t *testing.T, repo agentsessiontest.Repo) (url string, hits *atomic.Int64) {
	t.Helper()
	root := t.TempDir()
	bare := filepath.Join(root, "x.git")
	for _, args := range [][]string{{"clone", "--bare", "--quiet", repo.Dir, bare}, {"-C", bare, "update-server-info"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	hits = new(atomic.Int64)
	files := http.FileServer(http.Dir(root))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/x.git", hits
}

// TestCloneHostCheckedWhenGitConnects (issue: a clone URL could make git
// connect to loopback or cloud-metadata addresses): a repository whose
// clone URL resolves to this host when git is to connect, whatever it
// resolved to when it was registered (DNS rebinding), is never fetched:
// needs_clone, and the server gets no request. With ClonePrivate (an
// internal git server) the same URL is cloned.
func TestCloneHostCheckedWhenGitConnects(t *testing.T) {
	t.Parallel()
	repo := agentsessiontest.NewRepo(t, twoCommits...)
	for _, u := range []string{"", "localhost"} {
		url, hits := dumbGitServer(t, repo)
		if u != "" {
			url = strings.Replace(url, "127.0.0.1", u, 1)
		}
		ws, err := agentsession.NewWorkspaces(agentsession.Config{DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		r := chat.Repository{Name: "acme/rebound", CloneURL: url}
		_, err = ws.Prepare(t.Context(), seed(r, "rebound", repo.Head(), ""))
		if chat.ErrorCode(err) != chat.CodeNeedsClone || !strings.Contains(chat.ErrorMessage(err), "private address") {
			t.Errorf("Prepare from %s = %v, want needs_clone naming the private address", url, err)
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("git sent %d requests to %s", n, url)
		}

		allowed, err := agentsession.NewWorkspaces(agentsession.Config{DataDir: t.TempDir(), ClonePrivate: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := allowed.Prepare(t.Context(), seed(r, "internal", repo.Head(), "")); err != nil {
			t.Errorf("Prepare from %s with ClonePrivate: %v", url, err)
		}
		if hits.Load() == 0 {
			t.Errorf("with ClonePrivate git never reached %s", url)
		}
	}
}
