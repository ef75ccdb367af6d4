package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/store/storetest"
	"github.com/prchat/prchat/worker/workertest"
)

// TestMain stops what the package's tests share once they have all ended:
// the browser tests' Chromium.
func TestMain(m *testing.M) {
	code := m.Run()
	stopChromium()
	os.Exit(code)
}

// mode is a database + Redis pair a daemon test runs on.
type mode struct {
	name string
	// real: Postgres and Redis from the test environment; else the
	// embedded SQLite and Redis.
	real bool
}

// modes lists the embedded default always, and Postgres + Redis when the
// test environment names them.
func modes(t *testing.T) []mode {
	ms := []mode{{name: "embedded"}}
	if os.Getenv("PRCHAT_TEST_DATABASE_URL") != "" && os.Getenv("PRCHAT_TEST_REDIS_URL") != "" {
		ms = append(ms, mode{name: "postgres+redis", real: true})
	}
	return ms
}

// postgresURL returns a URL of the test Postgres whose search_path is a new
// schema of the test's own, dropped when the test ends.
func postgresURL(t *testing.T) string {
	t.Helper()
	return storetest.PostgresURL(t, os.Getenv(storetest.EnvDatabaseURL))
}

// env is a booted daemon with a registered repository.
type env struct {
	t        *testing.T
	cfg      Config
	opts     options
	d        *daemon
	url      string
	scripted *scripted.Backend
	repo     string // owner/name
	repoDir  string
	head     string
	base     string
}

// setup boots a serve daemon on 127.0.0.1:0 in mode m, with a scripted
// backend, and registers a git repository with two commits.
func setup(t *testing.T, m mode, change func(*Config)) *env {
	t.Helper()
	e := prepare(t, m, change)
	e.serve(roleOf("serve"))
	return e
}

// prepare makes the configuration and the git repository of a test but
// starts nothing. A test that runs the API and the worker apart gets a
// Redis URL in every mode.
func prepare(t *testing.T, m mode, change func(*Config)) *env {
	t.Helper()
	e := &env{t: t, scripted: scripted.New("")}
	cfg, err := loadConfig("serve", nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.WorkerID = "w-" + uuid.NewString()[:8]
	cfg.ReconcileInterval = 200 * time.Millisecond
	if m.real {
		cfg.DatabaseURL = postgresURL(t)
		cfg.RedisURL = workertest.RedisURL(t)
	}
	if change != nil {
		change(&cfg)
	}
	e.cfg = cfg
	e.opts = options{backends: []chat.Backend{e.scripted}, heartbeatTTL: 2 * time.Second, reconcileGrace: 300 * time.Millisecond}
	e.repoDir, e.head, e.base = gitRepo(t)
	e.repo = "acme/widget"
	return e
}

// serve boots a daemon with role r; the first one with an API becomes the
// one requests go to, and gets the repository registered.
func (e *env) serve(r role) *daemon {
	e.t.Helper()
	d := e.boot(r, e.cfg)
	if r.api && e.d == nil {
		e.d, e.url = d, d.URL()
		e.do("POST", "/api/v1/repos", map[string]any{"name": e.repo, "clone_path": e.repoDir}, http.StatusCreated, nil)
	}
	return d
}

// boot starts a daemon with role r; it stops when the test ends.
func (e *env) boot(r role, cfg Config) *daemon {
	e.t.Helper()
	d, err := start(context.Background(), cfg, r, e.opts)
	if err != nil {
		e.t.Fatalf("start daemon: %v", err)
	}
	e.t.Cleanup(d.Stop)
	return d
}

// gitRepo makes a repository with two commits and returns its path, head
// and base.
func gitRepo(t *testing.T) (dir, head, base string) {
	t.Helper()
	r := agentsessiontest.NewRepo(t, map[string]string{
		"main.go":              "package main\n\nfunc main() {\n\tloadSettings(\"app.toml\")\n}\n",
		"settings/settings.go": "package settings\n\n// Load reads the file.\nfunc Load(path string) error {\n\treturn nil\n}\n",
	}, map[string]string{
		"settings/settings.go": "package settings\n\nimport \"errors\"\n\nvar errEmptyPath = errors.New(\"empty path\")\n\n// Load reads the settings file at path.\nfunc Load(path string) error {\n\tif path == \"\" {\n\t\treturn errEmptyPath\n\t}\n\treturn nil\n}\n",
	})
	return r.Dir, r.Head(), r.Commits[0]
}

// do sends a JSON request and checks the status; out receives the body.
func (e *env) do(method, path string, body any, want int, out any) []byte {
	e.t.Helper()
	return doAt(e.t, e.url, method, path, body, want, out)
}

func doAt(t *testing.T, base, method, path string, body any, want int, out any) []byte {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, raw)
	}
	checkResponse(t, req, resp, raw)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return raw
}

// review records a review of PR 7 with backend and returns its version.
func (e *env) review(backend string, extra map[string]any) int {
	e.t.Helper()
	body := map[string]any{"head_sha": e.head, "base_sha": e.base, "backend": backend, "markdown": "Load now refuses an empty path."}
	for k, v := range extra {
		body[k] = v
	}
	var r struct{ Version int }
	e.do("POST", "/api/v1/repos/"+e.repo+"/pulls/7/reviews", body, http.StatusCreated, &r)
	return r.Version
}

type turnJSON struct {
	ConversationID string       `json:"conversation_id"`
	Number         int          `json:"number"`
	State          string       `json:"state"`
	Answer         *chat.Answer `json:"answer"`
	Note           string       `json:"note"`
	Reason         string       `json:"reason"`
	Session        string       `json:"session"`
	Usage          chat.Usage   `json:"usage"`
}

// ask starts a conversation about version v and returns its id.
func (e *env) ask(v int, question string) (string, turnJSON) {
	e.t.Helper()
	var out struct {
		Conversation struct{ ID string }
		Turn         turnJSON
	}
	e.do("POST", fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews/%d/conversations", e.repo, v), map[string]any{"question": question}, http.StatusAccepted, &out)
	if out.Turn.State != "queued" || out.Turn.Number != 1 {
		e.t.Fatalf("new turn = %+v", out.Turn)
	}
	return out.Conversation.ID, out.Turn
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// wait long-polls a turn until it is settled: as long as an agent CLI
// may take to start on a loaded machine, and a while more.
func (e *env) wait(conv string, n int) turnJSON {
	e.t.Helper()
	var got turnJSON
	chattest.EventuallyWithin(e.t, agentsessiontest.CLIStart+time.Minute, fmt.Sprintf("turn %s/%d to settle", conv, n), func() bool {
		var t turnJSON
		e.do("GET", fmt.Sprintf("/api/v1/conversations/%s/turns/%d?wait=5s", conv, n), nil, http.StatusOK, &t)
		got = t
		return chat.State(t.State).Final()
	})
	return got
}

// checkAnswer checks an answer against the schema and every citation
// against the lines of the head commit.
func (e *env) checkAnswer(a *chat.Answer) {
	e.t.Helper()
	if a == nil {
		e.t.Fatal("no answer")
	}
	raw, err := json.Marshal(a)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := chat.ParseAnswer(raw, ""); err != nil {
		e.t.Fatalf("answer breaks the schema: %v\n%s", err, raw)
	}
	for _, c := range a.Citations {
		out, err := exec.Command("git", "-C", e.repoDir, "show", e.head+":"+c.Path).Output()
		if err != nil {
			e.t.Fatalf("citation %s is not a file at the head: %v", c.Path, err)
		}
		n := strings.Count(string(out), "\n")
		if !strings.HasSuffix(string(out), "\n") {
			n++
		}
		if c.StartLine < 1 || c.EndLine < c.StartLine || c.EndLine > n {
			e.t.Fatalf("citation %s:%d-%d is outside the file's %d lines", c.Path, c.StartLine, c.EndLine, n)
		}
	}
}

// goodAnswer is a valid answer about the test repository.
func goodAnswer(text string) *chat.Answer {
	return &chat.Answer{AnswerMarkdown: text, Citations: []chat.Citation{{Path: "settings/settings.go", StartLine: 8, EndLine: 12}}}
}

func TestEndToEndLocalBackend(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, m, nil)
			v := e.review("local", nil)
			conv, _ := e.ask(v, "Why does Load return errEmptyPath?")
			got := e.wait(conv, 1)
			if got.State != "succeeded" {
				t.Fatalf("turn = %+v", got)
			}
			e.checkAnswer(got.Answer)
			if len(got.Answer.Citations) == 0 || got.Answer.Citations[0].Path != "settings/settings.go" {
				t.Errorf("citations = %+v, want settings/settings.go first", got.Answer.Citations)
			}
			if got.Session != "none" {
				t.Errorf("session = %q, want none", got.Session)
			}

			// The conversation lists its turn; the PR lists the conversation.
			var c struct {
				ID    string
				Turns []turnJSON
			}
			e.do("GET", "/api/v1/conversations/"+conv, nil, http.StatusOK, &c)
			if len(c.Turns) != 1 || c.Turns[0].State != "succeeded" {
				t.Errorf("conversation turns = %+v", c.Turns)
			}
			var list struct{ Conversations []struct{ ID string } }
			e.do("GET", "/api/v1/repos/"+e.repo+"/pulls/7/conversations", nil, http.StatusOK, &list)
			if len(list.Conversations) != 1 || list.Conversations[0].ID != conv {
				t.Errorf("conversations = %+v", list.Conversations)
			}

			// The turn and the requests are counted in the metrics (the
			// run counts its turn once it is stored as settled, which a
			// client can see first).
			wants := []string{
				`prchat_turns_total{backend="local",reason="",state="succeeded"} 1`,
				`prchat_http_requests_total{method="POST",route="/api/v1/repos/:owner/:repo/pulls/:pr/reviews/:version/conversations",status="202"} 1`,
				`prchat_turn_queue_wait_seconds_count 1`,
				`prchat_queue_jobs{queue="turns",state="pending"} 0`,
			}
			chattest.Eventually(t, "the metrics to hold "+strings.Join(wants, ", "), func() bool {
				return containsAll(string(e.do("GET", "/metrics", nil, http.StatusOK, nil)), wants)
			})
		})
	}
}
