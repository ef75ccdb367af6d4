package agentsession

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/prchat/prchat/chat"
)

// TestPinLeadsGitToTheCheckedAddress: with pin's configuration git's HTTP
// connects to the address that was checked, not to whatever the name
// resolves to when git looks it up (here: nothing, the name does not
// exist), and follows no redirect to another host.
func TestPinLeadsGitToTheCheckedAddress(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	bare := filepath.Join(t.TempDir(), "x.git")
	for _, args := range [][]string{
		{"-C", src, "init", "--quiet"},
		{"-C", src, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "--allow-empty", "-m", "one"},
		{"clone", "--bare", "--quiet", src, bare},
		{"-C", bare, "update-server-info"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	var hits, redirected atomic.Int64
	files := http.FileServer(http.Dir(filepath.Dir(bare)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Query().Get("moved") != "" {
			redirected.Add(1)
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ep := chat.CloneEndpoint{Scheme: "http", Host: "pinned.invalid", Port: u.Port()}
	g := withConfig(Git{}, pin(ep, []netip.Addr{netip.MustParseAddr("127.0.0.1")}))
	dst := filepath.Join(t.TempDir(), "clone.git")
	if out, err := g.Output(t.Context(), "", "clone", "--mirror", "--quiet", "--", "http://pinned.invalid:"+u.Port()+"/x.git", dst); err != nil {
		t.Fatalf("clone through the pinned address: %v\n%s", err, out)
	}
	if hits.Load() == 0 {
		t.Fatal("the server got no request")
	}

	// A redirect is not followed.
	moved := httptest.NewServer(http.RedirectHandler(srv.URL+"/x.git/info/refs?moved=1&service=git-upload-pack", http.StatusFound))
	defer moved.Close()
	mu, _ := url.Parse(moved.URL)
	g = withConfig(Git{}, pin(chat.CloneEndpoint{Scheme: "http", Host: "moved.invalid", Port: mu.Port()}, []netip.Addr{netip.MustParseAddr("127.0.0.1")}))
	if _, err := g.Output(t.Context(), "", "clone", "--mirror", "--quiet", "--", "http://moved.invalid:"+mu.Port()+"/x.git", filepath.Join(t.TempDir(), "m.git")); err == nil {
		t.Error("a clone through a redirect succeeded")
	}
	if redirected.Load() != 0 {
		t.Errorf("git followed the redirect %d times", redirected.Load())
	}
}
