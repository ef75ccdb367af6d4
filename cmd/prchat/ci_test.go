package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/claude"
	"github.com/prchat/prchat/agentsession/claude/claudetest"
	"github.com/prchat/prchat/agentsession/codex"
	"github.com/prchat/prchat/agentsession/codex/codextest"
	"github.com/prchat/prchat/agentsession/fakeapi/anthropic"
	"github.com/prchat/prchat/agentsession/fakeapi/responses"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"gopkg.in/yaml.v3"
)

// ciScript is the CI review step of deploy/ci.
var ciScript = filepath.Join(deployDir, "ci", "review.sh")

// ciRunner is a CI job's machine: a checkout of the PR's head, a home of
// its own (the CLIs' state under it), and a bin directory whose prchat is
// this test binary (TestDeployChild) and whose agent CLI records its
// environment before it runs the real one.
type ciRunner struct {
	root, checkout, home, bin string
	agentEnv                  string // what the agent CLI's environment held
	env                       map[string]string
}

// newCIRunner prepares a runner for a review of PR 7 with backend, whose
// CLI is the binary cli, and an admin token limited to the repository.
func (e *env) newCIRunner(backend, cli, token string) *ciRunner {
	t := e.t
	t.Helper()
	r := &ciRunner{root: t.TempDir()}
	r.checkout = filepath.Join(r.root, "checkout")
	r.home = filepath.Join(r.root, "home")
	r.bin = filepath.Join(r.root, "bin")
	r.agentEnv = filepath.Join(r.root, "agent.env")
	agentsessiontest.Git(t, e.repoDir, "worktree", "add", "--detach", "--quiet", r.checkout, e.head)
	t.Cleanup(func() { _ = exec.Command("git", "-C", e.repoDir, "worktree", "prune").Run() })
	for _, d := range []string{r.home, r.bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	writeScript(t, filepath.Join(r.bin, "prchat"),
		fmt.Sprintf("PRCHAT_DEPLOY_CHILD=1 exec %q -test.run='^TestDeployChild$' -- \"$@\"\n", self))
	writeScript(t, filepath.Join(r.bin, "agent"), fmt.Sprintf("env >%q\nexec %q \"$@\"\n", r.agentEnv, cli))
	r.env = map[string]string{
		"PATH":           r.bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME":           r.home,
		"TMPDIR":         r.root,
		"PRCHAT_SERVER":  e.url,
		"PRCHAT_TOKEN":   token,
		"REVIEW_BACKEND": backend,
		"REVIEW_REPO":    e.repo,
		"REVIEW_PR":      "7",
		"REVIEW_BASE":    e.base,
		"REVIEW_OUT":     filepath.Join(r.root, "out"),
	}
	return r
}

// writeScript writes an executable shell script.
func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// run runs the CI step in the checkout, as a job would, and returns its
// standard output; a failed step fails the test.
func (r *ciRunner) run(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), chattest.Within(3*time.Minute))
	defer cancel()
	script, err := filepath.Abs(ciScript)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "sh", script)
	cmd.Dir = r.checkout
	for k, v := range r.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s%s", ciScript, err, out.String(), errOut.String())
	}
	return out.String()
}

// checkRecorded checks what the step left in prchat and on the runner:
// review version 1 of the checkout's head by backend, with the finding,
// its session uploaded, the token never shown to the agent. It returns the
// review.
func (e *env) checkRecorded(r *ciRunner, token, backend, out, finding string) chat.Review {
	t := e.t
	t.Helper()
	if !strings.Contains(out, "recorded review version 1") || !strings.Contains(out, "uploaded its "+backend+" session") {
		t.Fatalf("the step did not record the review with its session:\n%s", out)
	}
	var rev chat.Review
	if err := json.Unmarshal(e.doAs(token, "GET", "/api/v1/repos/"+e.repo+"/pulls/7/reviews/1", nil, http.StatusOK), &rev); err != nil {
		t.Fatal(err)
	}
	checkout, _ := filepath.EvalSymlinks(r.checkout)
	if rev.Backend != backend || rev.HeadSHA != e.head || rev.BaseSHA != e.base || rev.SessionID == "" ||
		rev.RunDir != checkout || rev.SessionHost != "" || !strings.Contains(rev.Markdown, finding) {
		t.Errorf("recorded review = %+v, want %s's of %s in %s, with %q", rev, backend, e.head, checkout, finding)
	}
	stored, err := e.d.store.Review(t.Context(), e.repo, 7, 1)
	if err != nil {
		t.Fatal(err)
	}
	sf, err := e.d.store.SessionFile(t.Context(), chat.SessionOwner{ReviewID: stored.ID})
	if err != nil || sf.SessionID != rev.SessionID || sf.Backend != backend || sf.Size == 0 {
		t.Errorf("the stored session file = %+v, %v; want %s's of %s", sf, err, backend, rev.SessionID)
	}
	env, err := os.ReadFile(r.agentEnv)
	if err != nil {
		t.Fatalf("the agent CLI did not run: %v", err)
	}
	if bytes.Contains(env, []byte(token)) || bytes.Contains(env, []byte("PRCHAT_TOKEN")) {
		t.Error("the agent CLI got prchat's token")
	}
	return rev
}

// doAs sends a JSON request with token and checks the status; it returns
// the body.
func (e *env) doAs(token, method, path string, body any, want int) []byte {
	e.t.Helper()
	var rd *bytes.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	_, _ = raw.ReadFrom(resp.Body)
	if resp.StatusCode != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, raw.Bytes())
	}
	return raw.Bytes()
}

// askAs starts a conversation about review version 1 with token and
// returns its first turn once settled.
func (e *env) askAs(token, question string) turnJSON {
	e.t.Helper()
	var out struct{ Conversation struct{ ID string } }
	raw := e.doAs(token, "POST", "/api/v1/repos/"+e.repo+"/pulls/7/reviews/1/conversations", map[string]any{"question": question}, http.StatusAccepted)
	if err := json.Unmarshal(raw, &out); err != nil {
		e.t.Fatal(err)
	}
	return e.waitAs(token, out.Conversation.ID, 1)
}

// ciSetup boots the daemon of a CI step's test: an API on the test
// Postgres and Redis when the environment names them, with an admin token
// limited to the repository, as a CI job gets.
func ciSetup(t *testing.T) (e *env, ownDataDir bool, token string) {
	t.Helper()
	e, own := travelSetup(t)
	access, err := chat.NewAccess(chat.AccessConfig{}, e.d.store)
	if err != nil {
		t.Fatal(err)
	}
	if _, token, err = access.CreateToken(t.Context(), "ci", chat.ScopeAdmin, []string{e.repo}); err != nil {
		t.Fatal(err)
	}
	return e, own, token
}

// TestCIReviewClaude runs deploy/ci/review.sh as a CI job would, with the
// real Claude Code CLI against the fake model API: the review is written
// in the job's checkout and recorded with its session; once the runner is
// gone, a worker that never saw it forks the session and the model gets
// the review's messages and reads.
func TestCIReviewClaude(t *testing.T) {
	t.Parallel()
	api := anthropic.New(t)
	bin := claudetest.Bin(t)
	e, own, token := ciSetup(t)
	r := e.newCIRunner(chat.BackendClaudeCode, bin, token)
	r.env["CLAUDE_BIN"] = filepath.Join(r.bin, "agent")
	for _, kv := range api.Env() {
		k, v, _ := strings.Cut(kv, "=")
		r.env[k] = v
	}
	const finding = "CI-FINDING-c7: Load refuses an empty path."
	api.Push(
		anthropic.ToolUse("Read", map[string]any{"file_path": filepath.Join(r.checkout, "settings", "settings.go")}),
		anthropic.Text(finding),
	)
	out := r.run(t)
	if reqs := api.Messages(); len(reqs) == 0 || !reqs[0].Contains("pull request #7 of "+e.repo) || !reqs[0].Contains("+\tif path == \"\" {") {
		t.Errorf("the review's prompt lacks the PR or its diff: %q", reqs[0].Prompts())
	}
	rev := e.checkRecorded(r, token, chat.BackendClaudeCode, out, finding)
	if err := os.RemoveAll(r.root); err != nil {
		t.Fatal(err)
	}

	b, err := claude.New(claudetest.Config(t, api))
	if err != nil {
		t.Fatal(err)
	}
	e.hostWorker("ci-w1", b, own)
	api.Push(anthropic.Structured(goodAnswer("CI-A1: it checks the path first.")))
	t1 := e.askAs(token, "CI-Q1: why does Load refuse an empty path?")
	if t1.State != "succeeded" || t1.Session != "forked" || t1.Note != "" {
		t.Fatalf("turn 1 = %+v, want succeeded, forked, no note", t1)
	}
	reqs := api.Messages()
	fork := reqs[len(reqs)-1]
	if fork.SessionID == rev.SessionID || !fork.Contains(finding) || !fork.Contains("errEmptyPath") {
		t.Errorf("turn 1 (session %s) did not fork the review %s with its messages and reads:\n%q", fork.SessionID, rev.SessionID, fork.Prompts())
	}
}

// TestCIReviewCodex is TestCIReviewClaude with the real Codex CLI,
// configured as a runner would be: a CODEX_HOME whose config.toml names
// the model provider.
func TestCIReviewCodex(t *testing.T) {
	t.Parallel()
	api := responses.NewServer(t)
	bin := codextest.Bin(t)
	e, own, token := ciSetup(t)
	r := e.newCIRunner(chat.BackendCodex, bin, token)
	r.env["CODEX_BIN"] = filepath.Join(r.bin, "agent")
	r.env["REVIEW_MODEL"] = codextest.Model
	codexHome := filepath.Join(r.home, "codex")
	r.env["CODEX_HOME"] = codexHome
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(api.CodexConfig()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kv := range api.CodexEnv() {
		k, v, _ := strings.Cut(kv, "=")
		r.env[k] = v
	}
	const finding = "CI-FINDING-x7: Load refuses an empty path."
	api.Push(
		responses.Reply{Calls: []responses.Call{responses.Shell("cat settings/settings.go")}},
		responses.Reply{Text: finding},
	)
	out := r.run(t)
	if reqs := api.Requests(); len(reqs) == 0 || !reqs[0].Contains("pull request #7 of "+e.repo) || !reqs[0].Contains("+\tif path == \"\" {") {
		t.Errorf("the review's prompt lacks the PR or its diff")
	} else if m := reqs[0].Metadata; m.SandboxMode != "read-only" {
		t.Errorf("the review ran in sandbox %q, want read-only", m.SandboxMode)
	}
	rev := e.checkRecorded(r, token, chat.BackendCodex, out, finding)
	if rev.Model != codextest.Model {
		t.Errorf("the review's model = %q, want %s", rev.Model, codextest.Model)
	}
	if err := os.RemoveAll(r.root); err != nil {
		t.Fatal(err)
	}

	b, err := codex.New(codextest.Config(t, api))
	if err != nil {
		t.Fatal(err)
	}
	e.hostWorker("ci-x1", b, own)
	raw, err := json.Marshal(goodAnswer("CI-A1: it checks the path first."))
	if err != nil {
		t.Fatal(err)
	}
	api.Push(responses.Reply{Text: string(raw)})
	t1 := e.askAs(token, "CI-Q1: why does Load refuse an empty path?")
	if t1.State != "succeeded" || t1.Session != "forked" || t1.Note != "" {
		t.Fatalf("turn 1 = %+v, want succeeded, forked, no note", t1)
	}
	reqs := api.Requests()
	fork := reqs[len(reqs)-1]
	if m := fork.Metadata; m.HistoryInitialization != "cold_fork" || !fork.Contains(finding) || !fork.Contains("errEmptyPath") {
		t.Errorf("turn 1 (%+v) did not fork the review with its messages and reads:\n%v", m, fork.Texts(""))
	}
}

// TestCIWorkflowRunsTheStep: the GitHub Actions example checks out the
// PR's head with its history and runs the step with every setting the
// script requires.
func TestCIWorkflowRunsTheStep(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(deployDir, "ci", "github-actions.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		On   map[string]any `yaml:"on"`
		Jobs map[string]struct {
			Steps []struct {
				Uses string            `yaml:"uses"`
				With map[string]any    `yaml:"with"`
				Run  string            `yaml:"run"`
				Env  map[string]string `yaml:"env"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatal(err)
	}
	if _, ok := wf.On["pull_request"]; !ok || len(wf.Jobs) != 1 {
		t.Fatalf("the workflow runs on %v with %d jobs, want one job on pull_request", wf.On, len(wf.Jobs))
	}
	script, err := os.ReadFile(ciScript)
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range wf.Jobs {
		var checkout, step bool
		for _, s := range job.Steps {
			if strings.HasPrefix(s.Uses, "actions/checkout@") {
				checkout = s.With["ref"] == "${{ github.event.pull_request.head.sha }}" && s.With["fetch-depth"] == 0
			}
			if strings.Contains(s.Run, "prchat-review.sh") {
				step = true
				for _, name := range []string{"PRCHAT_SERVER", "PRCHAT_TOKEN", "REVIEW_BACKEND", "REVIEW_REPO", "REVIEW_PR", "REVIEW_BASE"} {
					if s.Env[name] == "" {
						t.Errorf("the step does not set %s", name)
					}
					if !bytes.Contains(script, []byte("${"+name+":")) {
						t.Errorf("the script does not read %s", name)
					}
				}
			}
		}
		if !checkout || !step {
			t.Errorf("the job checks out the PR's head with its history: %v; runs the step: %v", checkout, step)
		}
	}
}
