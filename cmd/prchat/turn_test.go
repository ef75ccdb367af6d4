package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
)

func TestRepairInvalidAnswers(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, m, nil)
			v := e.review("scripted", nil)

			e.scripted.Push(
				scripted.Step{Text: "I think Load is fine."},
				scripted.Step{Answer: &chat.Answer{AnswerMarkdown: "x", Citations: []chat.Citation{{Path: "settings/settings.go", StartLine: 12, EndLine: 14}}}},
				scripted.Step{Answer: goodAnswer("Load refuses an empty path.")},
			)
			conv, _ := e.ask(v, "Why does Load refuse?")
			got := e.wait(conv, 1)
			if got.State != "succeeded" || got.Usage.Repairs != 2 {
				t.Fatalf("turn = %+v, want succeeded with 2 repairs", got)
			}
			e.checkAnswer(got.Answer)
			// The repairs went back to the same session, saying what was wrong.
			reqs := e.scripted.Requests()
			if len(reqs) != 3 {
				t.Fatalf("agent calls = %d, want 3", len(reqs))
			}
			if !strings.Contains(reqs[1].Prompt, "no JSON object") || !strings.Contains(reqs[2].Prompt, "past its end") {
				t.Errorf("repair prompts do not say what was wrong:\n%s\n---\n%s", reqs[1].Prompt, reqs[2].Prompt)
			}
			if reqs[1].Mode != chat.SessionResumed || reqs[1].Session.ID == "" {
				t.Errorf("repair call = mode %s session %q, want a resume of the turn's session", reqs[1].Mode, reqs[1].Session.ID)
			}

			// An agent that never recovers fails the turn with invalid_answer.
			e.scripted.Push(scripted.Step{Text: "{}"}, scripted.Step{Text: "{}"}, scripted.Step{Text: "{}"})
			e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "And now?"}, http.StatusAccepted, nil)
			got = e.wait(conv, 2)
			if got.State != "failed" || got.Reason != "invalid_answer" || got.Usage.Repairs != 2 {
				t.Fatalf("turn 2 = %+v, want failed invalid_answer after 2 repairs", got)
			}
		})
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, m, func(c *Config) { c.TurnTimeout = 700 * time.Millisecond })
			v := e.review("scripted", nil)

			e.scripted.Push(scripted.Step{Hang: true})
			conv, _ := e.ask(v, "Will this end?")
			got := e.wait(conv, 1)
			if got.State != "failed" || got.Reason != "timeout" {
				t.Fatalf("turn 1 = %+v, want failed timeout", got)
			}

			// Cancel a hanging turn: it settles cancelled, and the next
			// question is accepted and answered.
			e.scripted.Push(scripted.Step{Hang: true})
			e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "And this?"}, http.StatusAccepted, nil)
			e.waitCalls(2)
			var out struct{ Turn turnJSON }
			e.do("POST", "/api/v1/conversations/"+conv+"/turns/2/cancel", nil, http.StatusAccepted, &out)
			if out.Turn.State != "cancelled" || out.Turn.Reason != "cancelled" {
				t.Fatalf("cancelled turn = %+v", out.Turn)
			}
			e.scripted.Push(scripted.Step{Answer: goodAnswer("third")})
			e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "Third?"}, http.StatusAccepted, nil)
			if got := e.wait(conv, 3); got.State != "succeeded" {
				t.Fatalf("turn 3 = %+v", got)
			}
			if got := e.wait(conv, 2); got.State != "cancelled" {
				t.Fatalf("turn 2 after the retry of its job = %+v", got)
			}
		})
	}
}

// TestCancelKillsTheAgent checks that cancelling a running turn ends the
// agent's call (its context), not only the turn's state.
func TestCancelKillsTheAgent(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	v := e.review("scripted", nil)
	e.scripted.Push(scripted.Step{Hang: true})
	conv, _ := e.ask(v, "Hang?")
	e.waitCalls(1)
	id := mustTurnID(t, e, conv, 1)
	if !e.d.svc.Running(id) {
		t.Fatal("the worker does not run the turn")
	}
	e.do("POST", "/api/v1/conversations/"+conv+"/turns/1/cancel", nil, http.StatusAccepted, nil)
	deadline := time.Now().Add(10 * time.Second)
	for e.d.svc.Running(id) {
		if time.Now().After(deadline) {
			t.Fatal("the agent call was still running 10s after cancel")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitCalls waits until the scripted agent has received n calls.
func (e *env) waitCalls(n int) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(e.scripted.Requests()) < n {
		if time.Now().After(deadline) {
			e.t.Fatalf("the agent received %d calls, want %d", len(e.scripted.Requests()), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestMaskingOfAnswerNoteAndTranscript(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{
		"aws access key":  "AKIAQYLPMN5HHHFPZAM2",
		"github pat":      "ghp_9aYbXcWdVeUfTgShRiQjPkOlNmMnLoKpJqIr",
		"slack token":     "xoxb-2741836501-5503861926-Ai8Q3Vb7Tz2Lw9Kx1Rm4Np6Y",
		"stripe":          "sk_live_51HqPzLKj8Xv3Tn2Mb7Wc9Rf4Yd6Ga1Se5Uh0",
		"openai":          "sk-proj-Q3vT9xLm2Bn7Kp4Wz8Rc1Yf6Hd5Ja0Sg3Ue7Ti9Ol2Np4Mq",
		"anthropic":       "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8Ba7Zy6Xw5Vu4Ts3Rq2Po1Nm0Lk-AbCdEf",
		"google":          "AIzaSyB4x7Q2mN9pL3kT8vR1wZ6yH5jD0cF2gS4",
		"jwt":             "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
		"url password":    "postgres://app:Tr0ub4dor-3xq9@db.internal:5432/app",
		"password assign": "password = \"c0rrect-h0rse-b4ttery-st4ple\"",
	}
	leaks := map[string]string{
		"aws access key":  "AKIAQYLPMN5HHHFPZAM2",
		"github pat":      "ghp_9aYbXcWdVeUfTgShRiQjPkOlNmMnLoKpJqIr",
		"slack token":     "xoxb-2741836501-5503861926-Ai8Q3Vb7Tz2Lw9Kx1Rm4Np6Y",
		"stripe":          "sk_live_51HqPzLKj8Xv3Tn2Mb7Wc9Rf4Yd6Ga1Se5Uh0",
		"openai":          "Q3vT9xLm2Bn7Kp4Wz8Rc1Yf6Hd5Ja0Sg3Ue7Ti9Ol2Np4Mq",
		"anthropic":       "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe9Dc8Ba7Zy6Xw5Vu4Ts3Rq2Po1Nm0Lk",
		"google":          "AIzaSyB4x7Q2mN9pL3kT8vR1wZ6yH5jD0cF2gS4",
		"jwt":             "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
		"url password":    "Tr0ub4dor-3xq9",
		"password assign": "c0rrect-h0rse-b4ttery-st4ple",
	}
	pem := "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2G5n8cYt1mMQqT0\nk9Qz7Xv1Ab2Cd3Ef4Gh5Ij6Kl7Mn8Op9Qr0St1Uv2Wx3Yz4Ab5Cd6\n-----END RSA PRIVATE KEY-----"
	lookAlikes := []string{e2eSHA, "123e4567-e89b-12d3-a456-426614174000"}
	ownSecret := "prchat-own-0penai-key-Vq7Lr2Xz9"

	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, m, func(c *Config) { c.OpenAIAPIKey = ownSecret })
			v := e.review("scripted", nil)
			var md strings.Builder
			md.WriteString("Here is what the config holds:\n\n")
			for name, s := range secrets {
				md.WriteString("- " + name + ": `" + s + "`\n")
			}
			md.WriteString("\n```\n" + pem + "\n```\n\nThe key " + ownSecret + " is ours. Commit " + lookAlikes[0] + ", request " + lookAlikes[1] + ".\n")
			answer := goodAnswer(md.String())
			answer.SuggestsFix = &chat.Fix{Summary: "Rotate " + secrets["github pat"] + " now."}
			e.scripted.Push(scripted.Step{
				Events: []chat.Event{
					{Type: chat.EventToolStart, ToolID: "t1", ToolName: "Read", Input: []byte(`{"path":".env","note":"` + leaks["stripe"] + `"}`)},
					{Type: chat.EventToolResult, ToolID: "t1", ToolName: "Read", Summary: "GITHUB_TOKEN=" + secrets["github pat"]},
					{Type: chat.EventTextDelta, Text: md.String()},
				},
				Answer: answer,
			})
			conv, _ := e.ask(v, "What is in the config?")
			got := e.wait(conv, 1)
			if got.State != "succeeded" {
				t.Fatalf("turn = %+v", got)
			}
			events, err := e.d.store.Events(context.Background(), mustTurnID(t, e, conv, 1), 0)
			if err != nil {
				t.Fatal(err)
			}
			var transcript strings.Builder
			for _, ev := range events {
				transcript.WriteString(ev.Text + ev.Summary + string(ev.Input) + ev.Message + "\n")
				if ev.Answer != nil {
					transcript.WriteString(ev.Answer.AnswerMarkdown)
				}
			}
			stored := map[string]string{
				"answer":     got.Answer.AnswerMarkdown,
				"fix":        got.Answer.SuggestsFix.Summary,
				"transcript": transcript.String(),
			}
			for where, text := range stored {
				for name, leak := range leaks {
					if strings.Contains(text, leak) {
						t.Errorf("%s: %s leaked", where, name)
					}
				}
				if strings.Contains(text, ownSecret) {
					t.Errorf("%s: the daemon's own secret leaked", where)
				}
				if strings.Contains(text, "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2G5n8cYt1mMQqT0") {
					t.Errorf("%s: the private key leaked", where)
				}
			}
			for where, text := range map[string]string{"answer": stored["answer"], "transcript": stored["transcript"]} {
				if !strings.Contains(text, "[masked:") {
					t.Errorf("%s has no [masked:<rule>] marker", where)
				}
				for _, keep := range lookAlikes {
					if !strings.Contains(text, keep) {
						t.Errorf("%s: look-alike %s was masked", where, keep)
					}
				}
			}

			// A failure's note is masked too.
			e.scripted.Push(scripted.Step{Err: errors.New("upstream said: bad key " + secrets["github pat"] + " for " + ownSecret)})
			e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "Again?"}, http.StatusAccepted, nil)
			got = e.wait(conv, 2)
			if got.State != "failed" || got.Reason != "backend_error" {
				t.Fatalf("turn 2 = %+v", got)
			}
			if strings.Contains(got.Note, leaks["github pat"]) || strings.Contains(got.Note, ownSecret) || !strings.Contains(got.Note, "[masked:") {
				t.Errorf("note not masked: %q", got.Note)
			}
		})
	}
}

const e2eSHA = "9fceb02d0ae598e95dc970b74767f19372d61af8"

func mustTurnID(t *testing.T, e *env, conv string, n int) string {
	t.Helper()
	turn, err := e.d.store.Turn(context.Background(), conv, n)
	if err != nil {
		t.Fatal(err)
	}
	return turn.ID
}
