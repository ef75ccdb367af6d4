package api_test

import (
	"net/http"
	"testing"

	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
)

// TestPullsFilesAndStats: the routes behind the dashboard answer in the
// contract's shapes, a file's lines come from the review's head with the
// agents' path rules, and the team figures count what happened.
func TestPullsFilesAndStats(t *testing.T) {
	t.Parallel()
	f := setup(t)
	pr := "/api/v1/repos/" + repoName + "/pulls/7"
	v := f.review("scripted", nil)
	if v != 1 {
		t.Fatalf("review version %d", v)
	}
	check := func(name, path string, status int) response {
		t.Helper()
		r := f.c.send(t, "GET", path, nil)
		if r.status != status {
			t.Fatalf("GET %s = %d %s, want %d", path, r.status, r.body, status)
		}
		if name != "" {
			f.golden(t, "resources/"+name, r)
		}
		return r
	}
	check("pulls", "/api/v1/repos/"+repoName+"/pulls", http.StatusOK)
	check("", "/api/v1/repos/acme/missing/pulls", http.StatusNotFound)

	files := pr + "/reviews/1/files"
	check("file_lines", files+"?path=settings/settings.go&start=8&end=12", http.StatusOK)
	var whole chat.FileLines
	f.do("GET", files+"?path=settings/settings.go", nil, http.StatusOK, &whole)
	if whole.TotalLines != 13 || len(whole.Lines) != 13 || whole.Lines[7] != "func Load(path string) error {" {
		t.Errorf("whole file = %+v", whole)
	}
	for _, bad := range []struct {
		query  string
		status int
	}{
		{"", http.StatusBadRequest},
		{"?path=../../etc/passwd", http.StatusBadRequest},
		{"?path=/etc/passwd", http.StatusBadRequest},
		{"?path=.git/config", http.StatusBadRequest},
		{"?path=.prchat/review.md", http.StatusBadRequest},
		{"?path=settings", http.StatusBadRequest},
		{"?path=missing.go", http.StatusNotFound},
		{"?path=main.go&start=0", http.StatusBadRequest},
		{"?path=main.go&start=5&end=2", http.StatusBadRequest},
	} {
		check("", files+bad.query, bad.status)
	}
	check("", pr+"/reviews/9/files?path=main.go", http.StatusNotFound)

	conv := f.ask(v, "Why does Load refuse an empty path?")
	f.scripted.Push(scripted.Step{Answer: &chat.Answer{AnswerMarkdown: "Because.", Citations: []chat.Citation{}}, Usage: chat.Usage{Repairs: 0}})
	f.settle(conv, 1)
	var st chat.Stats
	f.do("GET", "/api/v1/stats?since=7d&repo="+repoName, nil, http.StatusOK, &st)
	if st.Turns != 1 || st.TimeToAnswer.Count != 1 || len(st.Days) != 1 || st.Days[0].State != chat.StateSucceeded || st.Seeded != 1 {
		t.Errorf("stats = %+v", st)
	}
	check("", "/api/v1/stats?since=1w", http.StatusBadRequest)
	check("", "/api/v1/stats?since=400d", http.StatusBadRequest)
	check("", "/api/v1/stats?repo=acme/missing", http.StatusNotFound)
	check("", "/api/v1/stats?since=36h", http.StatusOK)
}
