package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prchat/prchat/chat"
)

// TestAdminQueuesOnEveryRedis: asynqmon, mounted at /admin/queues, serves
// its page and reads the daemon's queues through asynq's Inspector, on the
// embedded Redis and on a real one.
func TestAdminQueuesOnEveryRedis(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, m, nil)
			conv, _ := e.ask(e.review("local", nil), "Why does Load refuse an empty path?")
			e.wait(conv, 1)
			get := func(path string) []byte {
				t.Helper()
				resp, err := http.Get(e.url + path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s = %d %s", path, resp.StatusCode, body)
				}
				return body
			}
			if page := get("/admin/queues"); !strings.Contains(string(page), "Asynq") {
				t.Errorf("/admin/queues is not asynqmon's page: %.200s", page)
			}
			var queues struct {
				Queues []struct {
					Queue     string `json:"queue"`
					Processed int    `json:"processed"`
				} `json:"queues"`
			}
			if err := json.Unmarshal(get("/admin/queues/api/queues"), &queues); err != nil {
				t.Fatalf("asynqmon's queue list: %v", err)
			}
			processed := 0
			for _, q := range queues.Queues {
				processed += q.Processed
			}
			if len(queues.Queues) == 0 || processed == 0 {
				t.Errorf("asynqmon sees queues %+v, want the one that ran the turn", queues.Queues)
			}
		})
	}
}

// TestAdminQueuesAreForAdmins: once tokens exist, /admin/queues needs an
// admin token (a read token is refused, no token is sent to sign in).
func TestAdminQueuesAreForAdmins(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	access, err := chat.NewAccess(chat.AccessConfig{}, e.d.store)
	if err != nil {
		t.Fatal(err)
	}
	_, reader, err := access.CreateToken(t.Context(), "reader", chat.ScopeRead, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, admin, err := access.CreateToken(t.Context(), "admin", chat.ScopeAdmin, nil)
	if err != nil {
		t.Fatal(err)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	status := func(token string) int {
		req, _ := http.NewRequest("GET", e.url+"/admin/queues/api/queues", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(10 * time.Second)
	for status("") != http.StatusSeeOther {
		if time.Now().After(deadline) {
			t.Fatal("/admin/queues stays open once a token exists")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := status(reader); got != http.StatusForbidden {
		t.Errorf("a read token gets %d from /admin/queues, want 403", got)
	}
	if got := status(admin); got != http.StatusOK {
		t.Errorf("an admin token gets %d from /admin/queues, want 200", got)
	}
}
