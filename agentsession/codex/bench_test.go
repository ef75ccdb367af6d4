package codex_test

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/codex/codextest"
	"github.com/prchat/prchat/agentsession/fakeapi/responses"
	"github.com/prchat/prchat/chat"
)

// BenchmarkOverhead times one agent call whose answer takes one model
// request, through the real CLI against the fake API: the CLI run alone
// (`codex exec --json`, same fake, model and prompt), then the backend's
// new session, resume and fork, in turn in each iteration so that all see
// the same load. It reports the median of each in ms.
//
//	go test -run '^$' -bench Overhead -benchtime 15x ./agentsession/codex
func BenchmarkOverhead(b *testing.B) {
	e := setup(b)
	dir := e.runDir()
	e.api.Handle(func(responses.Request) responses.Reply { return responses.Reply{Text: answer("ok")} })
	first, _ := e.run(request(dir, chat.SessionSeeded, ""))

	prompt := request(dir, chat.SessionSeeded, "").Prompt
	args := append([]string{"exec", "--json", "-C", dir, "-s", "read-only", "-m", codextest.Model}, e.cfg.ExtraArgs...)
	args = append(args, "--", prompt)
	env := append(append(os.Environ(), e.cfg.Env...), "CODEX_HOME="+e.cfg.Home)
	bare := func() {
		cmd := exec.CommandContext(b.Context(), e.cfg.Bin, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("codex exec: %v\n%s", err, out)
		}
	}
	call := func(mode chat.SessionMode, session string) func() {
		return func() {
			if _, _, err := e.call(b.Context(), request(dir, mode, session)); err != nil {
				b.Fatalf("Run(%s): %v", mode, err)
			}
		}
	}
	steps := []struct {
		name string
		run  func()
		took []time.Duration
	}{
		{name: "bare-exec-ms", run: bare},
		{name: "run-start-ms", run: call(chat.SessionSeeded, "")},
		{name: "run-resume-ms", run: call(chat.SessionResumed, first.SessionID)},
		{name: "run-fork-ms", run: call(chat.SessionForked, first.SessionID)},
	}
	for b.Loop() {
		for i := range steps {
			start := time.Now()
			steps[i].run()
			steps[i].took = append(steps[i].took, time.Since(start))
		}
	}
	for _, s := range steps {
		slices.Sort(s.took)
		b.ReportMetric(float64(s.took[len(s.took)/2].Microseconds())/1000, s.name)
	}
}
