package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prchat/prchat/agentsession/fakeapi/anthropic"
	"github.com/prchat/prchat/agentsession/fakeapi/responses"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/cmd/prchat-bench/benchagent"
)

// cliStartTimeout bounds how long the turns of the clis phase may take to
// reach the fake model: a CLI's start costs about a second of a core, and
// on a loaded machine the starts of several take much longer.
const cliStartTimeout = 3 * time.Minute

// agentCLI is one agent CLI the clis phase runs.
type agentCLI struct {
	backend string // chat.BackendClaudeCode or chat.BackendCodex
	name    string
	flag    string // the bench's flag that names its binary
	bin     string // its binary, resolved
	exe     string // the program its processes run (bin with links resolved)
}

// lookCLI resolves the binary of an agent CLI: a path or a name in PATH,
// its links resolved; "" when there is none.
func lookCLI(bin string) (path, exe string) {
	if bin == "" {
		return "", ""
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", ""
	}
	if path, err = filepath.Abs(path); err != nil {
		return "", ""
	}
	exe, err = filepath.EvalSymlinks(path)
	if err != nil {
		return "", ""
	}
	return path, exe
}

// slowModel holds the fake models' answers: every request of the turns
// being measured waits until the model is released, which is --cli-hold
// after the last of them arrived, so that all the CLIs wait on their model
// at once for that long, as they do on a real one; requests after the
// release (a repair, a second call) are answered at once.
type slowModel struct {
	mu       sync.Mutex
	want     int             // the turns of the round
	seen     map[string]bool // their sessions (or requests) seen so far
	all      chan struct{}   // closed when want were seen
	released chan struct{}   // closed by release
}

// arm starts a round of n turns.
func (m *slowModel) arm(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.want, m.seen, m.all, m.released = n, map[string]bool{}, make(chan struct{}), make(chan struct{})
}

// wait is a request of session key (or "" when it names none): it waits
// until the round is released or ctx ends.
func (m *slowModel) wait(ctx context.Context, key string) {
	m.mu.Lock()
	released, all := m.released, m.all
	if released == nil {
		m.mu.Unlock()
		return
	}
	if key == "" {
		key = strconv.Itoa(len(m.seen))
	}
	if !m.seen[key] {
		m.seen[key] = true
		if len(m.seen) == m.want {
			close(all)
		}
	}
	m.mu.Unlock()
	select {
	case <-released:
	case <-ctx.Done():
	}
}

// release answers the round's requests.
func (m *slowModel) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.released != nil {
		close(m.released)
		m.released = nil
	}
}

// clis runs --cli-turns turns at once on each real agent CLI found (Claude
// Code, Codex) on a serve daemon whose PRCHAT_CONCURRENCY is their count,
// against fake model APIs in the bench that take --cli-hold to answer:
// while every CLI waits on its model it reads the RSS and CPU of each
// CLI's process tree, and after the turns settled the CPU of their whole
// runs (what the daemon waited for). A CLI that is not found is skipped.
func (b *bencher) clis(ctx context.Context) error {
	const sec = "clis"
	n, hold := b.cfg.CLITurns, b.cfg.CLIHold
	var found []agentCLI
	for _, c := range []agentCLI{
		{backend: chat.BackendClaudeCode, name: "Claude Code", flag: "--claude-bin", bin: b.cfg.ClaudeBin},
		{backend: chat.BackendCodex, name: "Codex", flag: "--codex-bin", bin: b.cfg.CodexBin},
	} {
		given := c.bin
		if c.bin, c.exe = lookCLI(c.bin); c.bin == "" {
			b.rep.note(fmt.Sprintf("clis: %s skipped: no binary %q (%s)", c.name, given, c.flag))
			continue
		}
		found = append(found, c)
	}
	if len(found) == 0 {
		return nil
	}

	model := &slowModel{}
	anth := anthropic.Open()
	defer anth.Close()
	anth.Handle(func(r anthropic.Request) anthropic.Reply {
		model.wait(ctx, r.SessionID)
		return anthropic.Structured(json.RawMessage(benchagent.Answer))
	})
	resp := responses.Open()
	defer resp.Close()
	resp.Handle(func(r responses.Request) responses.Reply {
		model.wait(ctx, r.Metadata.ThreadID)
		return responses.Reply{Text: benchagent.Answer}
	})
	home := filepath.Join(b.dir, "cli-home")
	codexHome := filepath.Join(home, "codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(resp.CodexConfig()), 0o600); err != nil {
		return err
	}
	settings := map[string]string{
		"PRCHAT_CONCURRENCY": strconv.Itoa(n),
		"HOME":               home,
		"CLAUDE_CONFIG_DIR":  filepath.Join(home, "claude"),
		"CODEX_HOME":         codexHome,
	}
	for _, c := range found {
		switch c.backend {
		case chat.BackendClaudeCode:
			settings["PRCHAT_CLAUDE_BIN"] = c.bin
		case chat.BackendCodex:
			settings["PRCHAT_CODEX_BIN"] = c.bin
		}
	}
	for _, kv := range append(anth.Env(), resp.CodexEnv()...) {
		k, v, _ := bytes.Cut([]byte(kv), []byte("="))
		settings[string(k)] = string(v)
	}
	d, err := b.startDaemonWith(ctx, "serve", "serve-clis", settings)
	if err != nil {
		return err
	}
	defer b.stopDaemon(d)

	for i, c := range found {
		if err := b.cliRound(ctx, sec, d, c, 100+i, model, n, hold); err != nil {
			return err
		}
	}
	b.rep.note(fmt.Sprintf("clis: %d turns at once per CLI on a serve daemon (PRCHAT_CONCURRENCY=%d), each a first question on a review with no session (seeded: a git worktree and a new CLI session), against fake model APIs in the bench that hold every request of the round until %s after the last turn's first request arrived; RSS and CPU are summed over each CLI's process tree (/proc) while all wait on their model (the threads' own CPU clocks), the CPU of a whole run is what the daemon's waited-for children used from the asks until all settled, per turn; prchat's own share of a running turn is the running phase's",
		n, n, hold))
	return nil
}

// cliRound runs n turns at once on one CLI and reports its figures.
func (b *bencher) cliRound(ctx context.Context, sec string, d *benchDaemon, c agentCLI, pr int, model *slowModel, n int, hold time.Duration) error {
	version, err := b.recordReview(ctx, d.url, pr, c.backend)
	if err != nil {
		return fmt.Errorf("clis: %w", err)
	}
	path := fmt.Sprintf("/api/v1/repos/bench/repo/pulls/%d/reviews/%d/conversations", pr, version)
	waited0, waitedErr := waitedCPU(d.cmd.Process.Pid)
	model.arm(n)
	defer model.release()
	askedAt := time.Now()
	convs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			convs[i], errs[i] = b.askOn(ctx, d.url, path, askBody(fmt.Sprintf("Where is bench.txt read? (%d)", i)))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clis: %s: %w", c.name, err)
	}
	turnIDs, err := b.turnsOf(ctx, convs)
	if err != nil {
		return fmt.Errorf("clis: %s: %w", c.name, err)
	}

	// Every CLI waits on its model: read the trees.
	wctx, cancel := context.WithTimeout(ctx, cliStartTimeout)
	defer cancel()
	select {
	case <-model.all:
	case <-wctx.Done():
		states, _ := b.turnStates(ctx, turnIDs)
		return fmt.Errorf("clis: %s: the %d turns' CLIs did not all reach the model within %s (turns: %v); %s", c.name, n, cliStartTimeout, states, d.logs.tail())
	}
	arrived := time.Now()
	releaseAt := arrived.Add(hold)
	if err := chat.Sleep(ctx, min(hold/4, 500*time.Millisecond)); err != nil {
		return err
	}
	first, err1 := childTrees(d.cmd.Process.Pid, c.exe)
	t1 := time.Now()
	if err := chat.Sleep(ctx, time.Until(releaseAt.Add(-min(hold/4, 500*time.Millisecond)))); err != nil {
		return err
	}
	second, err2 := childTrees(d.cmd.Process.Pid, c.exe)
	t2 := time.Now()
	if err := chat.Sleep(ctx, time.Until(releaseAt)); err != nil {
		return err
	}
	model.release()
	settled, err := b.waitTurns(wctx, turnIDs, turnState.final)
	if err != nil {
		return fmt.Errorf("clis: %s: wait for the turns to settle: %w", c.name, err)
	}
	waited1, waitedErr1 := waitedCPU(d.cmd.Process.Pid)

	states, err := b.turnStates(ctx, turnIDs)
	if err != nil {
		return fmt.Errorf("clis: %s: %w", c.name, err)
	}
	ok := 0
	for _, s := range states {
		if s.state == string(chat.StateSucceeded) {
			ok++
		}
	}
	label := c.backend
	b.rep.add(sec, fmt.Sprintf("%s: %d turns at once, succeeded", label, n), strconv.Itoa(ok), strconv.Itoa(n), verdict(ok == n))
	if err := cmpTrees(first, second, err1, err2, n); err != nil {
		b.rep.note(fmt.Sprintf("clis: %s: %v", c.name, err))
	} else {
		rss := make([]int64, 0, len(first))
		for _, t := range first {
			rss = append(rss, t.rss)
		}
		slices.Sort(rss)
		var sum int64
		for _, v := range rss {
			sum += v
		}
		b.rep.add(sec, "  RSS per running turn (its CLI's process tree), mean / max", mb(sum/int64(len(rss)))+" / "+mb(rss[len(rss)-1]), "", "")
		var cpu time.Duration
		byPID := map[int]time.Duration{}
		for _, t := range first {
			byPID[t.pid] = t.cpu
		}
		for _, t := range second {
			cpu += t.cpu - byPID[t.pid]
		}
		waiting := time.Duration(float64(cpu) / t2.Sub(t1).Seconds() / float64(len(second)))
		b.rep.add(sec, "  CPU per running turn per second, waiting on the model", ms(waiting), "", "")
	}
	if waitedErr == nil && waitedErr1 == nil {
		b.rep.add(sec, "  CPU per turn, its CLI's whole run (and its git)", ms((waited1-waited0)/time.Duration(n)), "", "")
	}
	b.rep.add(sec, "  asks → all at the model / all settled (with the hold)", secs(arrived.Sub(askedAt))+" / "+secs(settled.Sub(askedAt)), "", "")
	if ok != n {
		b.rep.note(fmt.Sprintf("clis: %s: the turns ended %v; %s", c.name, states, d.logs.tail()))
	}
	return nil
}

// cmpTrees checks the two readings of the CLIs' trees: n each, the same
// processes.
func cmpTrees(first, second []processTree, err1, err2 error, n int) error {
	switch {
	case err1 != nil:
		return err1
	case err2 != nil:
		return err2
	case len(first) != n || len(second) != n:
		return fmt.Errorf("%d and %d CLI processes found while %d turns waited on the model", len(first), len(second), n)
	}
	for i := range first {
		if !slices.ContainsFunc(second, func(t processTree) bool { return t.pid == first[i].pid }) {
			return fmt.Errorf("CLI process %d ended while its turn waited on the model", first[i].pid)
		}
	}
	return nil
}

// recordReview records a review of PR pr with backend and no session (a
// first question seeds one) and returns its version.
func (b *bencher) recordReview(ctx context.Context, base string, pr int, backend string) (int, error) {
	raw, _ := json.Marshal(map[string]string{"head_sha": b.head, "backend": backend, "markdown": "The bench review."})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/api/v1/repos/bench/repo/pulls/%d/reviews", base, pr), bytes.NewReader(raw))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("record a %s review: %w", backend, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var out struct {
		Version int `json:"version"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &out) != nil || out.Version == 0 {
		return 0, fmt.Errorf("record a %s review: HTTP %d: %s", backend, resp.StatusCode, bytes.TrimSpace(body))
	}
	return out.Version, nil
}
