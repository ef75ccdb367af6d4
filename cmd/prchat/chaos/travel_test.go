//go:build chaos

package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/claude/claudetest"
	"github.com/prchat/prchat/agentsession/codex/codextest"
	"github.com/prchat/prchat/agentsession/fakeapi/anthropic"
	"github.com/prchat/prchat/agentsession/fakeapi/responses"
)

const (
	// travelConversations is how many conversations each agent CLI holds.
	travelConversations = 2
	// travelSettle bounds how long a turn hit by a kill may take to settle:
	// the takeover (takeoverBound) and a CLI run on a loaded machine.
	travelSettle = takeoverBound + 60*time.Second
)

// agentCLI is one real agent CLI of TestSessionsTravel with its fake model
// API. The model answers each question of the trial (tokenPattern in its
// prompt) with that question's answer; the first call of a question marked
// slow waits until the trial has killed a worker (release). Every call is
// recorded with the caller's API key, which names the worker.
type agentCLI struct {
	backend string
	prompt  string // the review's prompt and finding, which every later call must hold
	finding string

	mu    sync.Mutex
	calls map[string][]cliCall // by question token
	slow  map[string]bool
	gate  chan struct{} // closed by release
}

// cliCall is one model call of a question's turn.
type cliCall struct {
	at       time.Time
	worker   string            // the process name its API key names
	contains func(string) bool // whether the history sent holds a text
}

// cliKey is the API key of worker name's agent CLIs.
func cliKey(name string) string { return "cli-key-" + name }

func newAgentCLI(backend, tag string) *agentCLI {
	return &agentCLI{
		backend: backend,
		prompt:  "Review this pull request (TRAVEL-PROMPT-" + tag + ").",
		finding: "TRAVEL-FINDING-" + tag + ": Load refuses an empty path.",
		calls:   map[string][]cliCall{},
		slow:    map[string]bool{},
		gate:    make(chan struct{}),
	}
}

// release answers the slow calls waiting and those to come.
func (a *agentCLI) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.gate:
	default:
		close(a.gate)
	}
}

// hold makes the slow calls to come wait again, until release.
func (a *agentCLI) hold() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gate = make(chan struct{})
}

// call records a model call whose last prompt is text, waits if it is
// the first call of a slow question, and returns the answer's JSON.
func (a *agentCLI) call(text, key string, contains func(string) bool) string {
	tokens := tokenPattern.FindAllString(text, -1)
	token := ""
	if len(tokens) > 0 {
		token = tokens[len(tokens)-1]
	}
	a.mu.Lock()
	a.calls[token] = append(a.calls[token], cliCall{at: time.Now(), worker: strings.TrimPrefix(key, cliKey("")), contains: contains})
	wait, gate := a.slow[token] && len(a.calls[token]) == 1, a.gate
	a.mu.Unlock()
	if wait {
		select {
		case <-gate:
		case <-time.After(travelSettle):
		}
	}
	answer, _ := json.Marshal(map[string]any{
		"answer_markdown": answerText(token),
		"citations":       []any{answerCitation},
		"suggests_fix":    nil,
	})
	return string(answer)
}

// callsOf returns the model calls of token's turn.
func (a *agentCLI) callsOf(token string) []cliCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]cliCall(nil), a.calls[token]...)
}

// claudeCLI is the real Claude Code CLI against a fake Anthropic API. It
// returns the CLI, the workers' settings and a function that writes the
// review on a laptop (a checkout and configuration directory of its own)
// and returns the `prchat review record` arguments and environment that
// upload it.
func claudeCLI(t *testing.T) (*agentCLI, map[string]string, func(c *cluster, laptopDir string) ([]string, []string)) {
	bin := claudetest.Bin(t)
	api := anthropic.New(t)
	a := newAgentCLI("claude-code", "c")
	api.Handle(func(r anthropic.Request) anthropic.Reply {
		var answer any
		_ = json.Unmarshal([]byte(a.call(r.Last().Text(), r.Header.Get("X-Api-Key"), r.Contains)), &answer)
		return anthropic.Structured(answer)
	})
	env := map[string]string{"PRCHAT_CLAUDE_BIN": bin}
	for _, kv := range api.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	review := func(c *cluster, laptopDir string) ([]string, []string) {
		laptop := claudetest.Config(t, api)
		api.Push(
			anthropic.ToolUse("Read", map[string]any{"file_path": filepath.Join(laptopDir, "settings", "settings.go")}),
			anthropic.Text(a.finding),
		)
		id := claudetest.Bare(t, laptop, laptopDir, "--", a.prompt)
		// --session-id alone: review record finds the file under
		// CLAUDE_CONFIG_DIR, as on the reviewer's laptop.
		return []string{"--session-id", id}, laptop.Env
	}
	return a, env, review
}

// codexCLI is claudeCLI for the real Codex CLI against a fake Responses
// API; a worker's CODEX_HOME holds a config.toml naming that provider.
func codexCLI(t *testing.T) (*agentCLI, func(dataDir string) map[string]string, func(c *cluster, laptopDir string) ([]string, []string)) {
	bin := codextest.Bin(t)
	api := responses.New(t)
	a := newAgentCLI("codex", "x")
	api.Handle(func(r responses.Request) responses.Reply {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		return responses.Reply{Text: a.call(r.LastUserText(), key, r.Contains)}
	})
	env := func(dataDir string) map[string]string {
		home := filepath.Join(dataDir, "codex")
		if err := os.MkdirAll(home, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(api.CodexConfig()), 0o600); err != nil {
			t.Fatal(err)
		}
		return map[string]string{"PRCHAT_CODEX_BIN": bin, "CODEX_HOME": home}
	}
	review := func(c *cluster, laptopDir string) ([]string, []string) {
		laptop := codextest.Config(t, api)
		api.Push(
			responses.Reply{Calls: []responses.Call{responses.Shell("cat " + filepath.Join(laptopDir, "settings", "settings.go"))}},
			responses.Reply{Text: a.finding},
		)
		id := codextest.Bare(t, laptop, laptopDir, "read-only", a.prompt)
		rollouts, _ := filepath.Glob(filepath.Join(laptop.Home, "sessions", "*", "*", "*", "rollout-*-"+id+".jsonl"))
		if len(rollouts) != 1 {
			t.Fatalf("the review's rollouts: %v", rollouts)
		}
		return []string{"--session-id", id, "--session-file", rollouts[0], "--model", codextest.Model}, append(laptop.Env, "CODEX_HOME="+laptop.Home)
	}
	return a, env, review
}

// recordedVersion finds the version in review record's output.
var recordedVersion = regexp.MustCompile(`recorded review version (\d+)`)

// writeReview writes a's review on a laptop, records it with `prchat
// review record` (which uploads the session file), deletes the laptop,
// and returns the review's version.
func writeReview(t *testing.T, c *cluster, a *agentCLI, review func(*cluster, string) ([]string, []string)) int {
	t.Helper()
	laptopDir := filepath.Join(t.TempDir(), "laptop-checkout")
	agentsessiontest.Git(t, c.repo.Dir, "worktree", "add", "--detach", "--quiet", laptopDir, c.repo.Head())
	args, env := review(c, laptopDir)
	md := filepath.Join(t.TempDir(), "review.md")
	if err := os.WriteFile(md, []byte("Load now refuses an empty path."), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(lab.bin, append([]string{"review", "record", "--repo", "acme/chaos", "--pr", "7",
		"--base", c.repo.Commits[0], "--backend", a.backend, "--run-dir", laptopDir, "--markdown-file", md}, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "PRCHAT_SERVER=" + c.apiURL()}, env...)
	out, err := cmd.CombinedOutput()
	m := recordedVersion.FindSubmatch(out)
	if err != nil || m == nil || !bytes.Contains(out, []byte("uploaded its "+a.backend+" session")) {
		t.Fatalf("review record: %v\n%s", err, out)
	}
	agentsessiontest.Git(t, c.repo.Dir, "worktree", "remove", "--force", laptopDir)
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == "HOME" || k == "CLAUDE_CONFIG_DIR" || k == "CODEX_HOME" {
			if err := os.RemoveAll(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

// travelTurn is the part of a turn TestSessionsTravel reads.
type travelTurn struct {
	turnJSON
	Session string `json:"session"`
}

// travelConv is one conversation of the trial: its CLI and the tokens of
// its questions, turn by turn.
type travelConv struct {
	cli    *agentCLI
	id     string
	tokens []string
	turns  []travelTurn
}

// askNext asks conv's next question (the first starts it, about review
// version v); slow makes its first model call wait for a kill.
func (c *cluster) askNext(t *testing.T, conv *travelConv, v int, slow bool) {
	t.Helper()
	token := "chaos-" + randomHex(16)
	conv.cli.mu.Lock()
	conv.cli.slow[token] = slow
	conv.cli.mu.Unlock()
	body := map[string]any{"question": question(token)}
	if conv.id == "" {
		var out struct {
			Conversation struct {
				ID string `json:"id"`
			} `json:"conversation"`
		}
		if _, err := c.http.do("POST", fmt.Sprintf("%s/api/v1/repos/acme/chaos/pulls/7/reviews/%d/conversations", c.apiURL(), v), body, http.StatusAccepted, &out); err != nil {
			t.Fatal(err)
		}
		conv.id = out.Conversation.ID
	} else if _, err := c.http.do("POST", fmt.Sprintf("%s/api/v1/conversations/%s/turns", c.apiURL(), conv.id), body, http.StatusAccepted, nil); err != nil {
		t.Fatal(err)
	}
	conv.tokens = append(conv.tokens, token)
}

// settleLast waits, at most until deadline, for the last turn of each
// conversation to reach a final state, and keeps it.
func (c *cluster) settleLast(convs []*travelConv, deadline time.Time) {
	var wg sync.WaitGroup
	for _, conv := range convs {
		wg.Go(func() {
			n := len(conv.tokens)
			var got travelTurn
			for time.Now().Before(deadline) {
				wait := min(20*time.Second, time.Until(deadline))
				_, err := c.http.do("GET", fmt.Sprintf("%s/api/v1/conversations/%s/turns/%d?wait=%dms", c.apiURL(), conv.id, n, max(wait.Milliseconds(), 1)), nil, http.StatusOK, &got)
				if err != nil {
					time.Sleep(200 * time.Millisecond)
					continue
				}
				if got.final() {
					break
				}
			}
			conv.turns = append(conv.turns, got)
		})
	}
	wg.Wait()
}

// waitAtModel waits until the last turn of every conversation runs (a
// Codex turn may wait for another of its review's lineage on the same
// worker) and those of each CLI have called the model, and returns how
// many calls each worker made.
func (c *cluster) waitAtModel(t *testing.T, trial string, convs []*travelConv) map[string]int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		byWorker, atModel, running := map[string]int{}, map[*agentCLI]bool{}, 0
		for _, conv := range convs {
			n := len(conv.tokens)
			if calls := conv.cli.callsOf(conv.tokens[n-1]); len(calls) > 0 {
				byWorker[calls[0].worker]++
				atModel[conv.cli] = true
			}
			var tr travelTurn
			if _, err := c.http.do("GET", fmt.Sprintf("%s/api/v1/conversations/%s/turns/%d", c.apiURL(), conv.id, n), nil, http.StatusOK, &tr); err == nil && tr.State == "running" {
				running++
			}
		}
		if running == len(convs) && len(atModel) == 2 {
			return byWorker
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d turns running, the model called by %v", trial, running, len(convs), byWorker)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkTurn checks the last turn of conv: succeeded with its own answer,
// in session mode want, without a note, and its last model call carried
// the review's messages and read and every earlier question and answer.
// It returns the turn's model calls.
func checkTurn(t *testing.T, conv *travelConv, want string) []cliCall {
	t.Helper()
	n := len(conv.tokens)
	tr, token := conv.turns[n-1], conv.tokens[n-1]
	where := fmt.Sprintf("%s conversation %s turn %d", conv.cli.backend, conv.id, n)
	switch {
	case tr.State != "succeeded":
		t.Errorf("%s ended %s/%s: %q", where, tr.State, tr.Reason, tr.Note)
	case tr.Answer == nil || tr.Answer.AnswerMarkdown != answerText(token):
		t.Errorf("%s succeeded without its own answer: %+v", where, tr.Answer)
	case tr.Session != want || tr.Note != "":
		t.Errorf("%s ran %s with note %q, want %s without a note", where, tr.Session, tr.Note, want)
	}
	calls := conv.cli.callsOf(token)
	if len(calls) == 0 {
		t.Errorf("%s never reached the model", where)
		return nil
	}
	history := []string{conv.cli.prompt, conv.cli.finding, "errEmptyPath"}
	for _, earlier := range conv.tokens[:n-1] {
		history = append(history, question(earlier), answerText(earlier))
	}
	for _, h := range history {
		if !calls[len(calls)-1].contains(h) {
			t.Errorf("%s: the model's last call lacks %q: the context did not arrive", where, h)
		}
	}
	return calls
}

// TestSessionsTravel holds conversations with the real Claude Code and
// Codex CLIs (against fake model APIs) about reviews written on laptops
// that are gone, and SIGKILLs the worker holding them in the middle of a
// turn, twice: each turn hit runs again on the other worker, resumed from
// the stored session file with the whole history, never seeded.
func TestSessionsTravel(t *testing.T) {
	claudeAgent, claudeEnv, claudeReview := claudeCLI(t)
	codexAgent, codexEnv, codexReview := codexCLI(t)
	c := newCluster(t, "travel", clusterConfig{workerEnv: func(t *testing.T, name, dataDir string) map[string]string {
		env := map[string]string{"CLAUDE_CONFIG_DIR": filepath.Join(dataDir, "claude")}
		for _, m := range []map[string]string{claudeEnv, codexEnv(dataDir)} {
			for k, v := range m {
				env[k] = v
			}
		}
		env["ANTHROPIC_API_KEY"] = cliKey(name)
		env[responses.APIKeyEnv] = cliKey(name)
		return env
	}})
	versions := map[*agentCLI]int{
		claudeAgent: writeReview(t, c, claudeAgent, claudeReview),
		codexAgent:  writeReview(t, c, codexAgent, codexReview),
	}
	var convs []*travelConv
	for range travelConversations {
		convs = append(convs, &travelConv{cli: claudeAgent}, &travelConv{cli: codexAgent})
	}

	// Turn 1 forks the review's session on a worker that never saw it,
	// turn 2 resumes the conversation's.
	for _, want := range []string{"forked", "resumed"} {
		for _, conv := range convs {
			c.askNext(t, conv, versions[conv.cli], false)
		}
		c.settleLast(convs, time.Now().Add(2*time.Minute))
		for _, conv := range convs {
			checkTurn(t, conv, want)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	var rerun, settled []time.Duration
	hit, seeded := map[string]int{}, 0
	for wave := range 2 {
		trial := fmt.Sprintf("travel kill %d", wave+1)
		for _, a := range []*agentCLI{claudeAgent, codexAgent} {
			a.hold()
		}
		for _, conv := range convs {
			c.askNext(t, conv, 0, true)
		}
		byWorker := c.waitAtModel(t, trial, convs)
		victim := c.workers[0]
		if byWorker[c.workers[1].name] > byWorker[victim.name] {
			victim = c.workers[1]
		}
		killedAt := time.Now()
		victim.signal(syscall.SIGKILL)
		if _, ok := victim.wait(10 * time.Second); !ok {
			t.Fatalf("%s: the worker did not die of SIGKILL", trial)
		}
		// The other worker's turns go on; the dead one's orphaned CLIs
		// end too.
		for _, a := range []*agentCLI{claudeAgent, codexAgent} {
			a.release()
		}
		c.settleLast(convs, time.Now().Add(travelSettle))
		for _, conv := range convs {
			calls := checkTurn(t, conv, "resumed")
			if tr := conv.turns[len(conv.turns)-1]; tr.Session == "seeded" {
				seeded++
			}
			if len(calls) == 0 || calls[0].worker != victim.name {
				continue
			}
			hit[conv.cli.backend]++
			last := calls[len(calls)-1]
			if last.worker == victim.name {
				t.Errorf("%s: %s conversation %s's turn was not run again by another worker", trial, conv.cli.backend, conv.id)
				continue
			}
			rerun = append(rerun, last.at.Sub(killedAt))
			if tr := conv.turns[len(conv.turns)-1]; tr.FinishedAt != nil {
				settled = append(settled, tr.FinishedAt.Sub(killedAt))
			}
		}
		for _, v := range c.http.takeViolations() {
			t.Errorf("%s: %s", trial, v)
		}
		if t.Failed() {
			t.FailNow()
		}
		c.start(victim)
	}
	figure(t, "SIGKILL of the worker holding Claude Code and Codex conversations mid-turn, 2 trials, turns hit: %s; turns seeded after a kill: %d (want 0); kill → re-run %s; kill → settled %s",
		counts(hit), seeded, dist(rerun), dist(settled))
	if hit["claude-code"] == 0 || hit["codex"] == 0 {
		t.Errorf("the kills hit turns %v, want turns of both CLIs", hit)
	}
	if n, err := c.pendingTurns(time.Now().Add(time.Minute)); err != nil || n > 0 {
		t.Errorf("%d turns are still pending (%v)", n, err)
	}
}
