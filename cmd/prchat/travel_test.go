package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/claude"
	"github.com/prchat/prchat/agentsession/claude/claudetest"
	"github.com/prchat/prchat/agentsession/codex"
	"github.com/prchat/prchat/agentsession/codex/codextest"
	"github.com/prchat/prchat/agentsession/fakeapi/anthropic"
	"github.com/prchat/prchat/agentsession/fakeapi/responses"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/cmd/prchat/client"
	"github.com/prchat/prchat/store/storetest"
	"github.com/prchat/prchat/worker/workertest"
)

// travelSetup boots an API process for a test whose workers run apart
// (each with a CLI state of its own): on the test Postgres and Redis when
// the environment names them, so that each worker also has a data
// directory (run directories) of its own, as on another host.
func travelSetup(t *testing.T) (e *env, ownDataDir bool) {
	t.Helper()
	m := mode{name: "embedded"}
	if os.Getenv(storetest.EnvDatabaseURL) != "" && os.Getenv("PRCHAT_TEST_REDIS_URL") != "" {
		m = mode{name: "postgres+redis", real: true}
	}
	e = prepare(t, m, func(c *Config) {
		if c.RedisURL == "" {
			c.RedisURL = workertest.RedisURL(t)
		}
		// Every process of a deployment shares one (session files are
		// sealed with it).
		c.SecretKey = "one secret key for the whole deployment"
	})
	e.serve(role{api: true})
	return e, m.real
}

// hostWorker boots a worker with id whose only agent CLI backend is b (its
// CLI state its own) and, when ownDataDir, a data directory of its own.
func (e *env) hostWorker(id string, b chat.Backend, ownDataDir bool) *daemon {
	e.t.Helper()
	cfg := e.cfg
	cfg.WorkerID = id
	if ownDataDir {
		cfg.DataDir = e.t.TempDir()
	}
	opts := e.opts
	e.opts.backends = []chat.Backend{e.scripted, b}
	defer func() { e.opts = opts }()
	return e.boot(role{worker: true}, cfg)
}

// recordFromLaptop runs `prchat review record` as a reviewer's laptop or a
// CI job would, with the CLI state in env, and fails the test unless it
// uploaded the session.
func (e *env) recordFromLaptop(env map[string]string, args ...string) string {
	e.t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "PRCHAT_SERVER" {
			return e.url
		}
		return env[k]
	}
	if err := client.Review(context.Background(), append([]string{"record", "--repo", e.repo, "--pr", "7", "--base", e.base}, args...), getenv, &out, &errOut); err != nil {
		e.t.Fatalf("review record: %v\n%s%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "uploaded its") {
		e.t.Fatalf("review record uploaded no session:\n%s%s", out.String(), errOut.String())
	}
	return out.String()
}

// conversationHost returns the worker that holds a conversation's session.
func (e *env) conversationHost(id string) string {
	e.t.Helper()
	c, err := e.d.store.ConversationHead(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return c.SessionHost
}

// TestClaudeSessionTravels: a review written with the real Claude Code CLI
// on a "laptop" (a checkout and configuration directory of its own, deleted
// after `prchat review record` uploaded the session) is forked by a worker
// that never saw it; turn 2 resumes it there; that worker goes away and
// turn 3 resumes on another one, from the stored file: the model gets the
// review's and the earlier turns' messages every time.
func TestClaudeSessionTravels(t *testing.T) {
	t.Parallel()
	api := anthropic.New(t)
	e, own := travelSetup(t)

	laptop := claudetest.Config(t, api)
	laptopHome := t.TempDir()
	laptop.Env = append(laptop.Env, "HOME="+laptopHome, "CLAUDE_CONFIG_DIR="+filepath.Join(laptopHome, ".claude"))
	reviewDir := filepath.Join(t.TempDir(), "laptop-checkout")
	agentsessiontest.Git(t, e.repoDir, "worktree", "add", "--detach", "--quiet", reviewDir, e.head)
	const reviewPrompt, finding = "Review this pull request (TRAVEL-PROMPT-c1).", "TRAVEL-FINDING-c1: Load refuses an empty path."
	api.Push(
		anthropic.ToolUse("Read", map[string]any{"file_path": filepath.Join(reviewDir, "settings", "settings.go")}),
		anthropic.Text(finding),
	)
	reviewID := claudetest.Bare(t, laptop, reviewDir, "--", reviewPrompt)
	md := filepath.Join(t.TempDir(), "review.md")
	if err := os.WriteFile(md, []byte("Load now refuses an empty path."), 0o600); err != nil {
		t.Fatal(err)
	}
	// --session-id alone: the CLI finds the file under CLAUDE_CONFIG_DIR.
	e.recordFromLaptop(map[string]string{"HOME": laptopHome, "CLAUDE_CONFIG_DIR": filepath.Join(laptopHome, ".claude")},
		"--backend", chat.BackendClaudeCode, "--session-id", reviewID, "--run-dir", reviewDir, "--markdown-file", md)
	if err := os.RemoveAll(laptopHome); err != nil {
		t.Fatal(err)
	}
	agentsessiontest.Git(t, e.repoDir, "worktree", "remove", "--force", reviewDir)

	newHost := func() *claude.Backend {
		b, err := claude.New(claudetest.Config(t, api))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	w1 := e.hostWorker("travel-w1", newHost(), own)
	answer := func(text string) anthropic.Reply { return anthropic.Structured(goodAnswer(text)) }
	last := func() anthropic.Request { reqs := api.Messages(); return reqs[len(reqs)-1] }

	const q1 = "TRAVEL-Q1: why does Load refuse an empty path?"
	api.Push(answer("TRAVEL-A1: it checks the path first."))
	conv, _ := e.ask(1, q1)
	t1 := e.wait(conv, 1)
	if t1.State != "succeeded" || t1.Session != "forked" || t1.Note != "" {
		t.Fatalf("turn 1 = %+v, want succeeded, forked, no note", t1)
	}
	fork := last()
	if !fork.Contains(finding) || !fork.Contains("errEmptyPath") || !fork.Contains(reviewPrompt) {
		t.Errorf("turn 1 did not get the review's messages and reads:\n%q", fork.Prompts())
	}
	if fork.Contains(reviewDir) {
		t.Errorf("turn 1's history still names the laptop's checkout %s", reviewDir)
	}

	api.Push(answer("TRAVEL-A2: errEmptyPath."))
	e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "TRAVEL-Q2: which error?"}, http.StatusAccepted, nil)
	if t2 := e.wait(conv, 2); t2.State != "succeeded" || t2.Session != "resumed" {
		t.Fatalf("turn 2 = %+v, want succeeded, resumed", t2)
	}
	if h := e.conversationHost(conv); h != "travel-w1" {
		t.Fatalf("the conversation's session is on %q, want travel-w1", h)
	}

	// The worker that holds the conversation goes away; another, which
	// never saw it, takes turn 3.
	w1.Stop()
	w2 := e.hostWorker("travel-w2", newHost(), own)
	api.Push(answer("TRAVEL-A3: yes."))
	e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "TRAVEL-Q3: anything else?"}, http.StatusAccepted, nil)
	t3 := e.wait(conv, 3)
	if t3.State != "succeeded" || t3.Session != "resumed" || t3.Note != "" {
		t.Fatalf("turn 3 = %+v, want succeeded, resumed, no note", t3)
	}
	r3 := last()
	for _, want := range []string{reviewPrompt, finding, "errEmptyPath", q1, "TRAVEL-A1", "TRAVEL-Q2", "TRAVEL-A2", "TRAVEL-Q3"} {
		if !r3.Contains(want) {
			t.Errorf("turn 3's request lacks %q:\n%q", want, r3.Prompts())
		}
	}
	if h := e.conversationHost(conv); h != "travel-w2" {
		t.Errorf("after turn 3 the conversation's session is on %q, want travel-w2", h)
	}
	// The worker's metrics count the restore, the stored file and the
	// turn's session mode; never the file itself. The run counts them once
	// the turn is stored as settled, which a client can see first.
	wants := []string{
		`prchat_session_restore_seconds_count{backend="claude-code"} 1`,
		`prchat_turns_by_session_total{backend="claude-code",session="resumed"} 1`,
		`prchat_session_file_bytes_stored_total{backend="claude-code"} `,
	}
	var metrics string
	chattest.Eventually(t, "worker 2's metrics to count turn 3", func() bool {
		metrics = string(getBody(t, w2.URL()+"/metrics"))
		return containsAll(metrics, wants)
	})
	if strings.Contains(metrics, "TRAVEL-") {
		t.Error("the metrics hold text of the session")
	}
}

// getBody returns the body of a GET of url, which must answer 200.
func getBody(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return body
}

// TestCodexSessionTravels is TestClaudeSessionTravels with the real Codex
// CLI, the file given with --session-file: a fork's rollout needs its
// parent's, so turn 3's restore writes both.
func TestCodexSessionTravels(t *testing.T) {
	t.Parallel()
	api := responses.NewServer(t)
	e, own := travelSetup(t)

	laptop := codextest.Config(t, api)
	reviewDir := filepath.Join(t.TempDir(), "laptop-checkout")
	agentsessiontest.Git(t, e.repoDir, "worktree", "add", "--detach", "--quiet", reviewDir, e.head)
	api.Push(
		responses.Reply{Calls: []responses.Call{responses.Shell("cat " + filepath.Join(reviewDir, "settings", "settings.go"))}},
		responses.Reply{Text: "TRAVEL-FINDING-x1: Load refuses an empty path."},
	)
	reviewID := codextest.Bare(t, laptop, reviewDir, "read-only", "Review this pull request (TRAVEL-PROMPT-x1).")
	rollouts, _ := filepath.Glob(filepath.Join(laptop.Home, "sessions", "*", "*", "*", "rollout-*-"+reviewID+".jsonl"))
	if len(rollouts) != 1 {
		t.Fatalf("the review's rollouts: %v", rollouts)
	}
	md := filepath.Join(t.TempDir(), "review.md")
	if err := os.WriteFile(md, []byte("Load now refuses an empty path."), 0o600); err != nil {
		t.Fatal(err)
	}
	e.recordFromLaptop(nil, "--backend", chat.BackendCodex, "--model", codextest.Model, "--session-id", reviewID,
		"--session-file", rollouts[0], "--run-dir", reviewDir, "--markdown-file", md)
	if err := os.RemoveAll(laptop.Home); err != nil {
		t.Fatal(err)
	}
	agentsessiontest.Git(t, e.repoDir, "worktree", "remove", "--force", reviewDir)

	newHost := func() *codex.Backend {
		cfg := codextest.Config(t, api)
		b, err := codex.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	w1 := e.hostWorker("travel-x1", newHost(), own)
	answer := func(text string) responses.Reply {
		raw, err := json.Marshal(goodAnswer(text))
		if err != nil {
			t.Fatal(err)
		}
		return responses.Reply{Text: string(raw)}
	}
	last := func() responses.Request { reqs := api.Requests(); return reqs[len(reqs)-1] }

	api.Push(answer("TRAVEL-A1: it checks the path first."))
	conv, _ := e.ask(1, "TRAVEL-Q1: why does Load refuse an empty path?")
	t1 := e.wait(conv, 1)
	if t1.State != "succeeded" || t1.Session != "forked" || t1.Note != "" {
		t.Fatalf("turn 1 = %+v, want succeeded, forked, no note", t1)
	}
	fork := last()
	if m := fork.Metadata; m.HistoryInitialization != "cold_fork" || !fork.Contains("TRAVEL-FINDING-x1") || !fork.Contains("errEmptyPath") {
		t.Errorf("turn 1 (%+v) did not fork the review with its messages and reads:\n%v", m, fork.Texts(""))
	}
	if fork.Contains(reviewDir) {
		t.Errorf("turn 1's history still names the laptop's checkout %s", reviewDir)
	}
	thread := fork.Metadata.ThreadID

	api.Push(answer("TRAVEL-A2: errEmptyPath."))
	e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "TRAVEL-Q2: which error?"}, http.StatusAccepted, nil)
	if t2 := e.wait(conv, 2); t2.State != "succeeded" || t2.Session != "resumed" {
		t.Fatalf("turn 2 = %+v, want succeeded, resumed", t2)
	}

	w1.Stop()
	e.hostWorker("travel-x2", newHost(), own)
	api.Push(answer("TRAVEL-A3: yes."))
	e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "TRAVEL-Q3: anything else?"}, http.StatusAccepted, nil)
	t3 := e.wait(conv, 3)
	if t3.State != "succeeded" || t3.Session != "resumed" || t3.Note != "" {
		t.Fatalf("turn 3 = %+v, want succeeded, resumed, no note", t3)
	}
	r3 := last()
	if m := r3.Metadata; m.HistoryInitialization != "cold_resume" || m.ThreadID != thread {
		t.Errorf("turn 3 metadata = %+v, want a resume of %s", m, thread)
	}
	for _, want := range []string{"TRAVEL-PROMPT-x1", "TRAVEL-FINDING-x1", "errEmptyPath", "TRAVEL-Q1", "TRAVEL-A1", "TRAVEL-Q2", "TRAVEL-A2", "TRAVEL-Q3"} {
		if !r3.Contains(want) {
			t.Errorf("turn 3's request lacks %q:\n%v", want, r3.Texts(""))
		}
	}
}

// TestReviewRecordRefusesBadSessionFiles: `prchat review record` checks a
// session file as the server would before it records anything: a garbage,
// truncated or other backend's file, or one holding another session,
// records no review. A file over the server's limit is refused after the
// review was recorded: the command fails and says so, nothing is stored.
func TestReviewRecordRefusesBadSessionFiles(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, func(c *Config) { c.MaxSessionBytes = 2048 })
	const id, other = "5b0c53c4-3f52-4f5e-9a55-0d8d3c1f6f11", "0d6a1f3e-2b49-4c6f-8c0a-0e7e3b7a9c22"
	claudeFile := func(id string) string {
		return `{"type":"user","sessionId":"` + id + `","cwd":"/laptop/widget","message":{"role":"user","content":"Review PR 7"}}` + "\n" +
			`{"type":"assistant","sessionId":"` + id + `","cwd":"/laptop/widget","message":{"role":"assistant","content":"FINDING"}}` + "\n"
	}
	dir := t.TempDir()
	md := filepath.Join(dir, "review.md")
	if err := os.WriteFile(md, []byte("Load refuses empty paths."), 0o600); err != nil {
		t.Fatal(err)
	}
	record := func(backend, data string) (int, string) {
		file := filepath.Join(dir, "session.jsonl")
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		getenv := func(k string) string {
			if k == "PRCHAT_SERVER" {
				return e.url
			}
			return ""
		}
		code := Main(context.Background(), []string{"review", "record", "--repo", e.repo, "--pr", "7", "--base", e.base, "--head", e.head,
			"--backend", backend, "--session-id", id, "--session-file", file, "--run-dir", e.repoDir, "--markdown-file", md}, getenv, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	good := claudeFile(id)
	for _, tc := range []struct{ name, backend, data, says string }{
		{"garbage", chat.BackendClaudeCode, "\x00\x01garbage\n", "line 1 is not a JSON object"},
		{"truncated", chat.BackendClaudeCode, good[:len(good)-15], "line 2 is not a JSON object"},
		{"the other backend's file", chat.BackendCodex, good, "not a Codex session"},
		{"another session's file", chat.BackendClaudeCode, claudeFile(other), "holds session"},
		{"a backend without session files", chat.BackendOpenAI, good, `backend "openai" keeps no session file`},
	} {
		code, out := record(tc.backend, tc.data)
		if code != 1 || !strings.Contains(out, tc.says) || !strings.Contains(out, "nothing was recorded") {
			t.Errorf("%s: exit %d, %q; want 1, saying %q and that nothing was recorded", tc.name, code, out, tc.says)
		}
		if _, err := e.d.store.Review(t.Context(), e.repo, 7, 1); chat.ErrorCode(err) != chat.CodeNoReview {
			t.Fatalf("%s: a review was recorded (%v)", tc.name, err)
		}
	}

	big := good + strings.Repeat(`{"type":"summary","summary":"padding"}`+"\n", 100)
	code, out := record(chat.BackendClaudeCode, big)
	if code != 1 || !strings.Contains(out, "review version 1 was recorded, but its session file was not stored") || !strings.Contains(out, "larger than 2048 bytes") {
		t.Errorf("over the limit: exit %d, %q; want 1, saying the review has no session", code, out)
	}
	rev, err := e.d.store.Review(t.Context(), e.repo, 7, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.d.store.SessionFile(t.Context(), chat.SessionOwner{ReviewID: rev.ID}); chat.ErrorCode(err) != chat.CodeNotFound {
		t.Errorf("a session file over the limit was stored (%v)", err)
	}
}
