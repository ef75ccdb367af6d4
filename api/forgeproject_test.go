package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestRegisterForgeProject: a repository registers with its project on
// its forge (a GitLab project in nested groups), which it returns; a path
// that is no project's is refused, as is one another repository names.
func TestRegisterForgeProject(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var r struct {
		Name         string
		ForgeProject string `json:"forge_project"`
	}
	f.do("POST", "/api/v1/repos", map[string]any{"name": "platform/widget", "clone_path": f.repo.Dir, "forge_project": "acme/platform/widget"}, http.StatusCreated, &r)
	if r.Name != "platform/widget" || r.ForgeProject != "acme/platform/widget" {
		t.Fatalf("registered %+v", r)
	}
	f.do("GET", "/api/v1/repos/platform/widget", nil, http.StatusOK, &r)
	if r.ForgeProject != "acme/platform/widget" {
		t.Fatalf("got %+v", r)
	}
	for _, c := range []struct {
		project string
		status  int
		code    string
	}{
		{"acme", 400, "invalid"},
		{"acme//widget", 400, "invalid"},
		{"/acme/widget", 400, "invalid"},
		{"acme/../widget", 400, "invalid"},
		{"acme/-x/widget", 400, "invalid"},
		{"acme/platform widget", 400, "invalid"},
		{strings.Repeat("a/", 200) + "b", 400, "invalid"},
		{"acme/platform/widget", 409, "conflict"},
	} {
		resp := f.c.send(t, "POST", "/api/v1/repos", map[string]any{"name": "acme/other", "clone_path": f.repo.Dir, "forge_project": c.project})
		if resp.status != c.status || !strings.Contains(string(resp.body), `"code":"`+c.code+`"`) {
			t.Errorf("forge_project %q = %d %s, want %d %s", c.project, resp.status, resp.body, c.status, c.code)
		}
	}
	f.do("GET", "/api/v1/repos/acme/other", nil, http.StatusNotFound, nil)
}

// TestForgeProjectNamesStayApart: a forge project is no other
// repository's name, and a name no other repository's forge project (a
// webhook would not know which is meant); a forge project that is the
// repository's own name is no forge project.
func TestForgeProjectNamesStayApart(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.do("POST", "/api/v1/repos", map[string]any{"name": "platform/widget", "clone_path": f.repo.Dir, "forge_project": "acme/platform/widget"}, http.StatusCreated, nil)
	f.do("POST", "/api/v1/repos", map[string]any{"name": "acme/two", "clone_path": f.repo.Dir, "forge_project": "gl/two"}, http.StatusCreated, nil)
	for _, c := range []struct {
		body map[string]any
		msg  string
	}{
		{map[string]any{"name": "gl/two", "clone_path": f.repo.Dir}, "gl/two is the forge project of the registered repository acme/two"},
		{map[string]any{"name": "acme/other", "clone_path": f.repo.Dir, "forge_project": repoName}, "is the name of another registered repository"},
		{map[string]any{"name": "acme/other", "clone_path": f.repo.Dir, "forge_project": "platform/widget"}, "is the name of another registered repository"},
	} {
		r := f.c.send(t, "POST", "/api/v1/repos", c.body)
		if r.status != http.StatusConflict || !strings.Contains(string(r.body), c.msg) {
			t.Errorf("%v = %d %s, want 409: %s", c.body, r.status, r.body, c.msg)
		}
	}
	f.do("GET", "/api/v1/repos/acme/other", nil, http.StatusNotFound, nil)
	f.do("GET", "/api/v1/repos/gl/two", nil, http.StatusNotFound, nil)
	var same struct {
		ForgeProject *string `json:"forge_project"`
	}
	f.do("POST", "/api/v1/repos", map[string]any{"name": "acme/same", "clone_path": f.repo.Dir, "forge_project": "acme/same"}, http.StatusCreated, &same)
	if same.ForgeProject != nil {
		t.Errorf("forge_project = %q, want none: it is the repository's name", *same.ForgeProject)
	}
}
