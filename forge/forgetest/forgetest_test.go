package forgetest_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/forge/forgetest"
)

// TestCore: every call is recorded with the status answered, and a
// scripted failure answers in the route's place as often as asked.
func TestCore(t *testing.T) {
	t.Parallel()
	core := &forgetest.Core{EscapedPaths: true}
	srv := httptest.NewServer(core.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forgetest.WriteJSON(w, http.StatusCreated, map[string]string{"ok": "yes"})
	})))
	defer srv.Close()
	core.Fail("POST", "/projects/a%2Fb", http.StatusBadGateway, 1)
	post := func(path string) int {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(`{"body":"x"}`))
		req.Header.Set("Authorization", "Bearer t")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	got := []int{post("/projects/a%2Fb/notes"), post("/projects/a%2Fb/notes"), post("/other")}
	if diff := cmp.Diff([]int{http.StatusBadGateway, http.StatusCreated, http.StatusCreated}, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	want := []forgetest.Call{
		{Method: "POST", Path: "/projects/a%2Fb/notes", Auth: "Bearer t", Body: `{"body":"x"}`, Status: http.StatusBadGateway},
		{Method: "POST", Path: "/projects/a%2Fb/notes", Auth: "Bearer t", Body: `{"body":"x"}`, Status: http.StatusCreated},
	}
	if diff := cmp.Diff(want, core.CallsTo("POST", "/projects/")); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if n := len(core.Calls()); n != 3 {
		t.Errorf("%d calls recorded, want 3", n)
	}
}

// TestCoreLoseAfter: a request whose answer is lost is carried out once,
// and its client learns nothing of it (a 502, an error).
func TestCoreLoseAfter(t *testing.T) {
	t.Parallel()
	for _, loss := range forgetest.Losses {
		t.Run(loss.String(), func(t *testing.T) {
			t.Parallel()
			core := &forgetest.Core{}
			var done atomic.Int32
			srv := httptest.NewServer(core.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				done.Add(1)
				forgetest.WriteJSON(w, http.StatusCreated, map[string]string{"ok": "yes"})
			})))
			defer srv.Close()
			core.LoseAfter("POST", "/notes", loss, 1)
			client := &http.Client{Timeout: 300 * time.Millisecond}
			post := func() (int, error) {
				resp, err := client.Post(srv.URL+"/notes", "application/json", strings.NewReader(`{}`))
				if err != nil {
					return 0, err
				}
				resp.Body.Close()
				return resp.StatusCode, nil
			}
			code, err := post()
			switch {
			case loss == forgetest.LoseToBadGateway && (err != nil || code != http.StatusBadGateway):
				t.Errorf("lost answer: %d %v, want 502", code, err)
			case loss != forgetest.LoseToBadGateway && err == nil:
				t.Errorf("lost answer: %d, want an error", code)
			}
			if n := done.Load(); n != 1 {
				t.Errorf("carried out %d times, want 1", n)
			}
			if code, err := post(); err != nil || code != http.StatusCreated {
				t.Errorf("next post: %d %v, want 201", code, err)
			}
			answered := 0
			calls := core.CallsTo("POST", "/notes")
			for _, c := range calls {
				if c.Status == http.StatusCreated {
					answered++
				}
			}
			if len(calls) != 2 || answered != 1 {
				t.Errorf("calls = %+v, want one lost and one answered", calls)
			}
		})
	}
}
