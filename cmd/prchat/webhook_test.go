package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/template"
	"time"

	"github.com/google/uuid"
	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/forge/github/githubtest"
)

const (
	testWebhookSecret  = "whsec-0123456789abcdef"
	testPreviousSecret = "whsec-previous-secret"
)

// ghPayload fills a payload template of testdata/github.
type ghPayload struct {
	Action       string
	Repo         string
	PR           int
	CommentID    int64
	Body         string
	Login        string
	UserType     string
	CloneURL     string
	Private      bool
	Installation int64
	OnIssue      bool
	// Association is the comment's author_association (default MEMBER).
	Association string
	// Review comments.
	Path        string
	StartLine   string // JSON: a number or null
	Line        string
	SubjectType string
	// Side is the diff's side of the lines: RIGHT (the default) or LEFT.
	Side       string
	InReplyTo  int64
	Head, Base string
}

func (p ghPayload) Owner() string { o, _, _ := strings.Cut(p.Repo, "/"); return o }
func (p ghPayload) Name() string  { _, n, _ := strings.Cut(p.Repo, "/"); return n }

// commentIDs numbers the comments of the tests (from 1,000,001).
var commentIDs atomic.Int64

// payload renders testdata/github/<file> with p (defaults filled in).
func payload(t *testing.T, file string, p ghPayload) []byte {
	t.Helper()
	if p.Action == "" {
		p.Action = "created"
	}
	if p.Repo == "" {
		p.Repo = "acme/widget"
	}
	if p.Login == "" {
		p.Login = "reviewer"
	}
	if p.Association == "" {
		p.Association = "MEMBER"
	}
	if p.UserType == "" {
		p.UserType = "User"
	}
	if p.CloneURL == "" {
		p.CloneURL = "https://github.com/" + p.Repo + ".git"
	}
	if p.StartLine == "" {
		p.StartLine = "null"
	}
	if p.Line == "" {
		p.Line = "null"
	}
	if p.SubjectType == "" {
		p.SubjectType = "line"
	}
	if p.Side == "" {
		p.Side = "RIGHT"
	}
	tmpl, err := template.New(file).Funcs(template.FuncMap{"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	}}).ParseFiles(filepath.Join("testdata", "github", file))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, p); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b.Bytes()) {
		t.Fatalf("%s does not render valid JSON:\n%s", file, b.Bytes())
	}
	return b.Bytes()
}

func sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

type receipt struct {
	Status         string `json:"status"`
	Reason         string `json:"reason"`
	ConversationID string `json:"conversation_id"`
	Turn           int    `json:"turn"`
	Error          *struct{ Code, Message string }
}

// deliver posts a GitHub delivery signed with secret ("" = unsigned) and
// returns the status and the decoded answer.
func deliver(t *testing.T, base, event, delivery string, body []byte, secret string) (int, receipt) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/github", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/044aadd")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	if secret != "" {
		req.Header.Set("X-Hub-Signature-256", sign(secret, body))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	checkResponse(t, req, resp, raw)
	var r receipt
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return resp.StatusCode, r
}

// ghEnv is a daemon wired to a fake GitHub.
type ghEnv struct {
	*env
	gh *githubtest.Server
	// hold blocks the scripted agent on questions that say "hold".
	hold chan struct{}
	// settling says that settle's repository is registered and reviewed.
	settling bool
}

// setupGitHub boots a serve daemon in mode m whose GitHub API is a fake,
// with a scripted agent that answers by the question: "fail" fails the
// turn, "hold" waits for hold to close, anything else is answered.
func setupGitHub(t *testing.T, m mode, change func(*Config, *githubtest.Server)) *ghEnv {
	t.Helper()
	fake := githubtest.New(t)
	e := prepare(t, m, func(c *Config) {
		c.GitHubSecret = testWebhookSecret
		c.GitHubSecretPrevious = testPreviousSecret
		c.GitHubAPIURL = fake.URL
		c.GitHubToken = fake.Token
		if change != nil {
			change(c, fake)
		}
	})
	e.opts.outboxInterval = 20 * time.Millisecond
	e.opts.commentPoll = 20 * time.Millisecond
	e.opts.commentBackoff = 50 * time.Millisecond
	// A stopped daemon's comments are taken up again after this; longer
	// than a comment takes to be asked on a loaded machine (at 500ms, a
	// second pass over the same comment looked its PR up again).
	e.opts.commentLease = chattest.Within(5 * time.Second)
	e.opts.forgeTimeout = 3 * time.Second
	g := &ghEnv{env: e, gh: fake, hold: make(chan struct{})}
	e.scripted.Fallback = func(req chat.RunRequest) scripted.Step {
		switch {
		case strings.Contains(req.Question, "fail"):
			return scripted.Step{Err: errors.New("the model's server hung up")}
		case strings.Contains(req.Question, "cut short"):
			return scripted.Step{Events: []chat.Event{{Type: chat.EventNote, Text: chat.NoteCutShort}}, Answer: goodAnswer("The first half of an answer")}
		case strings.Contains(req.Question, "hold"):
			return scripted.Step{Wait: g.hold, Answer: goodAnswer("Held, then answered.")}
		}
		return scripted.Step{Answer: &chat.Answer{
			AnswerMarkdown: "Load returns errEmptyPath for an empty path.\n/ask me again\n```\n/usr/bin/env true\n```",
			Citations:      []chat.Citation{{Path: "settings/settings.go", StartLine: 8, EndLine: 12}},
			SuggestsFix:    &chat.Fix{Summary: "Wrap errEmptyPath with the caller's name."},
		}}
	}
	e.serve(roleOf("serve"))
	return g
}

// reviewPR records a scripted review of pr.
func (g *ghEnv) reviewPR(pr int) {
	g.t.Helper()
	g.do("POST", fmt.Sprintf("/api/v1/repos/%s/pulls/%d/reviews", g.repo, pr),
		map[string]any{"head_sha": g.head, "base_sha": g.base, "backend": "scripted", "markdown": "Load now refuses an empty path."},
		http.StatusCreated, nil)
}

// waitTurnState polls a turn until it reaches state.
func (g *ghEnv) waitTurnState(conv string, n int, state string) {
	g.t.Helper()
	chattest.Eventually(g.t, "turn state "+state, func() bool {
		var t turnJSON
		g.do("GET", fmt.Sprintf("/api/v1/conversations/%s/turns/%d", conv, n), nil, http.StatusOK, &t)
		return t.State == state
	})
}

// withMarker returns the comments that carry a prchat marker.
func withMarker(cs []githubtest.Comment) []githubtest.Comment {
	var out []githubtest.Comment
	for _, c := range cs {
		if strings.Contains(c.Body, "<!-- prchat:turn:") {
			out = append(out, c)
		}
	}
	return out
}

// count counts rows of a table.
func (g *ghEnv) count(table string) int64 {
	g.t.Helper()
	var n int64
	if err := g.d.store.DB().Table(table).Count(&n).Error; err != nil {
		g.t.Fatal(err)
	}
	return n
}

func checkReplyLines(t *testing.T, body string) {
	t.Helper()
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "/") {
			t.Errorf("reply line starts with /: %q", l)
		}
	}
}

func TestGitHubWebhooks(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			g := setupGitHub(t, m, nil)
			for _, pr := range []int{7, 9, 10, 11, 12} {
				g.reviewPR(pr)
			}
			newID := func() int64 { return 1_000_000 + commentIDs.Add(1) }
			ask := func(pr int, body string) (int64, []byte) {
				id := newID()
				return id, payload(t, "issue_comment.json", ghPayload{PR: pr, CommentID: id, Body: body})
			}

			t.Run("forged and unsigned deliveries are refused and store nothing", func(t *testing.T) {
				_, body := ask(7, "/ask Why?")
				if code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, "not-the-secret"); code != http.StatusUnauthorized || r.Error == nil || r.Error.Code != "unauthorized" {
					t.Fatalf("forged: %d %+v", code, r)
				}
				if code, _ := deliver(t, g.url, "issue_comment", uuid.NewString(), body, ""); code != http.StatusUnauthorized {
					t.Fatalf("unsigned: %d", code)
				}
				// A signature of another body does not pass either.
				req, _ := http.NewRequest(http.MethodPost, g.url+"/webhooks/github", bytes.NewReader(body))
				req.Header.Set("X-GitHub-Event", "issue_comment")
				req.Header.Set("X-GitHub-Delivery", uuid.NewString())
				req.Header.Set("X-Hub-Signature-256", sign(testWebhookSecret, append(body, ' ')))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("signature of another body: %d", resp.StatusCode)
				}
				// A body over 25 MB is refused before it is read.
				big := append(bytes.Repeat([]byte(" "), 25<<20), body...)
				if code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), big, testWebhookSecret); code != http.StatusRequestEntityTooLarge || r.Error == nil || r.Error.Code != "invalid" {
					t.Errorf("a body over 25 MB: %d %+v", code, r)
				}
				// A signed issue_comment without its issue is invalid (not a
				// crash), and a comment with a NUL byte is not taken.
				var noIssue map[string]any
				if err := json.Unmarshal(body, &noIssue); err != nil {
					t.Fatal(err)
				}
				delete(noIssue, "issue")
				raw, _ := json.Marshal(noIssue)
				if code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), raw, testWebhookSecret); code != http.StatusBadRequest || r.Error == nil || r.Error.Code != "invalid" {
					t.Errorf("no issue: %d %+v", code, r)
				}
				if n := g.count("webhook_comments"); n != 0 {
					t.Errorf("webhook_comments has %d rows after refused deliveries", n)
				}
				if n := g.count("conversations"); n != 0 {
					t.Errorf("%d conversations after refused deliveries", n)
				}
				if len(g.gh.Calls()) != 0 {
					t.Errorf("GitHub was called: %+v", g.gh.Calls())
				}
				_, nul := ask(7, "/ask Why\u0000 this?")
				if code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), nul, testWebhookSecret); code != http.StatusOK || r.Status != "ignored" || !strings.Contains(r.Reason, "NUL") {
					t.Errorf("a NUL byte: %d %+v", code, r)
				}
				if n := g.count("webhook_comments"); n != 0 {
					t.Errorf("webhook_comments has %d rows after a comment with a NUL byte", n)
				}
			})

			t.Run("ping and ignored events", func(t *testing.T) {
				ping := payload(t, "ping.json", ghPayload{})
				if code, r := deliver(t, g.url, "ping", uuid.NewString(), ping, testWebhookSecret); code != http.StatusOK || r.Status != "pong" {
					t.Fatalf("ping: %d %+v", code, r)
				}
				// While the secret is rotated, the previous one signs too.
				if code, r := deliver(t, g.url, "ping", uuid.NewString(), ping, testPreviousSecret); code != http.StatusOK || r.Status != "pong" {
					t.Fatalf("ping signed with the previous secret: %d %+v", code, r)
				}
				cases := []struct {
					name, event string
					body        []byte
					reason      string
				}{
					{"push event", "push", ping, "not acted on"},
					{"no /ask", "issue_comment", payload(t, "issue_comment.json", ghPayload{PR: 7, CommentID: newID(), Body: "LGTM /ask nothing"}), "does not start with /ask"},
					{"/asking", "issue_comment", payload(t, "issue_comment.json", ghPayload{PR: 7, CommentID: newID(), Body: "/asking for a friend"}), "does not start with /ask"},
					{"edited", "issue_comment", payload(t, "issue_comment.json", ghPayload{PR: 7, CommentID: newID(), Body: "/ask Why?", Action: "edited"}), "only new comments"},
					{"an issue", "issue_comment", payload(t, "issue_comment.json", ghPayload{PR: 7, CommentID: newID(), Body: "/ask Why?", OnIssue: true}), "not a pull request"},
					{"a bot", "issue_comment", payload(t, "issue_comment.json", ghPayload{PR: 7, CommentID: newID(), Body: "/ask Why?", Login: "dependabot[bot]", UserType: "Bot"}), "bots"},
					{"prchat itself", "issue_comment", payload(t, "issue_comment.json", ghPayload{PR: 7, CommentID: newID(), Body: "/ask Why?", Login: g.gh.Login}), "own account"},
				}
				for _, c := range cases {
					code, r := deliver(t, g.url, c.event, uuid.NewString(), c.body, testWebhookSecret)
					if code != http.StatusOK || r.Status != "ignored" || !strings.Contains(r.Reason, c.reason) {
						t.Errorf("%s: %d %+v, want 200 ignored with %q", c.name, code, r, c.reason)
					}
				}
				if n := g.count("webhook_comments"); n != 0 {
					t.Errorf("webhook_comments has %d rows after ignored events", n)
				}
			})

			var timeline string
			t.Run("a timeline question is answered in the PR, with links and a footer", func(t *testing.T) {
				id, body := ask(7, "/ask Why does Load return errEmptyPath?")
				code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				if code != http.StatusAccepted || r.Status != "queued" || r.ConversationID == "" || r.Turn != 1 {
					t.Fatalf("ask: %d %+v", code, r)
				}
				timeline = r.ConversationID
				if got := g.wait(r.ConversationID, 1); got.State != "succeeded" {
					t.Fatalf("turn = %+v", got)
				}
				chattest.Eventually(t, "the reply", func() bool { return len(withMarker(g.gh.IssueComments("acme/widget", 7))) == 1 })
				reply := withMarker(g.gh.IssueComments("acme/widget", 7))[0].Body
				for _, want := range []string{
					"Load returns errEmptyPath for an empty path.",
					fmt.Sprintf("(https://github.com/acme/widget/blob/%s/settings/settings.go#L8-L12)", g.head),
					"**Suggested fix**", "Wrap errEmptyPath with the caller's name.",
					"<sub>prchat · scripted · seeded a new session · ",
				} {
					if !strings.Contains(reply, want) {
						t.Errorf("reply lacks %q:\n%s", want, reply)
					}
				}
				checkReplyLines(t, reply)
				var eyes bool
				for _, re := range g.gh.Reactions() {
					eyes = eyes || (re.CommentID == id && re.Content == "eyes" && !re.Review)
				}
				if !eyes {
					t.Errorf("no 👀 on comment %d: %+v", id, g.gh.Reactions())
				}

				// The next timeline question continues the conversation.
				_, body = ask(7, "/ask And for a path of spaces?")
				code, r = deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				if code != http.StatusAccepted || r.ConversationID != timeline || r.Turn != 2 {
					t.Fatalf("second ask: %d %+v, want turn 2 of %s", code, r, timeline)
				}
				if got := g.wait(timeline, 2); got.Session != "resumed" {
					t.Errorf("turn 2 session = %q, want resumed", got.Session)
				}
				chattest.Eventually(t, "the second reply", func() bool { return len(withMarker(g.gh.IssueComments("acme/widget", 7))) == 2 })
			})

			t.Run("ten copies of one delivery at once make one turn", func(t *testing.T) {
				_, body := ask(7, "/ask Is errEmptyPath exported?")
				delivery := uuid.NewString()
				var wg sync.WaitGroup
				codes := make([]int, 10)
				statuses := make([]string, 10)
				for i := range 10 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						codes[i], _ = func() (int, receipt) {
							c, r := deliver(t, g.url, "issue_comment", delivery, body, testWebhookSecret)
							statuses[i] = r.Status
							return c, r
						}()
					}()
				}
				wg.Wait()
				queued, dup := 0, 0
				for i := range 10 {
					switch {
					case codes[i] == http.StatusAccepted:
						queued++
					case codes[i] == http.StatusOK && statuses[i] == "duplicate":
						dup++
					}
				}
				if queued != 1 || dup != 9 {
					t.Fatalf("codes %v statuses %v: want one 202 and nine duplicates", codes, statuses)
				}
				g.wait(timeline, 3)
				var c struct{ Turns []turnJSON }
				g.do("GET", "/api/v1/conversations/"+timeline, nil, http.StatusOK, &c)
				if len(c.Turns) != 3 {
					t.Fatalf("%d turns, want 3", len(c.Turns))
				}
				chattest.Eventually(t, "the third reply", func() bool { return len(withMarker(g.gh.IssueComments("acme/widget", 7))) == 3 })

				// The same comment in a new delivery is a duplicate too.
				if code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret); code != http.StatusOK || r.Status != "duplicate" {
					t.Fatalf("same comment, new delivery: %d %+v", code, r)
				}
			})

			t.Run("review threads are conversations, focused on their lines", func(t *testing.T) {
				root := newID()
				g.gh.AddReviewComment("acme/widget", 7, githubtest.Comment{ID: root, Body: "/ask Why this check?", User: githubtest.User{Login: "reviewer", Type: "User"}})
				body := payload(t, "pull_request_review_comment.json", ghPayload{PR: 7, CommentID: root, Body: "/ask Why this check?",
					Path: "settings/settings.go", StartLine: "8", Line: "12", Head: g.head, Base: g.base})
				code, r := deliver(t, g.url, "pull_request_review_comment", uuid.NewString(), body, testWebhookSecret)
				if code != http.StatusAccepted || r.Turn != 1 || r.ConversationID == timeline {
					t.Fatalf("review comment: %d %+v", code, r)
				}
				thread := r.ConversationID
				g.wait(thread, 1)
				focus := g.scripted.Requests()[len(g.scripted.Requests())-1].Focus
				if focus == nil || len(focus.Anchors) != 1 || focus.Anchors[0] != (chat.Anchor{Path: "settings/settings.go", StartLine: 8, EndLine: 12}) {
					t.Errorf("focus = %+v, want settings/settings.go 8-12", focus)
				}
				chattest.Eventually(t, "the thread reply", func() bool { return len(withMarker(g.gh.ReviewComments("acme/widget", 7))) == 1 })
				if got := withMarker(g.gh.ReviewComments("acme/widget", 7))[0]; got.InReplyTo != root {
					t.Errorf("reply in reply to %d, want %d", got.InReplyTo, root)
				}
				if len(g.gh.CallsTo("POST", fmt.Sprintf("/repos/acme/widget/pulls/7/comments/%d/replies", root))) != 1 {
					t.Errorf("no reply through the replies endpoint: %+v", g.gh.Calls())
				}

				// A reply in the thread continues its conversation.
				reply := newID()
				body = payload(t, "pull_request_review_comment.json", ghPayload{PR: 7, CommentID: reply, InReplyTo: root, Body: "/ask And what if the path is blank?",
					Path: "settings/settings.go", StartLine: "8", Line: "12", Head: g.head, Base: g.base})
				code, r = deliver(t, g.url, "pull_request_review_comment", uuid.NewString(), body, testWebhookSecret)
				if code != http.StatusAccepted || r.ConversationID != thread || r.Turn != 2 {
					t.Fatalf("thread reply: %d %+v, want turn 2 of %s", code, r, thread)
				}
				g.wait(thread, 2)
				chattest.Eventually(t, "the second thread reply", func() bool { return len(withMarker(g.gh.ReviewComments("acme/widget", 7))) == 2 })
			})

			t.Run("an outdated comment is focused on its original lines", func(t *testing.T) {
				id := newID()
				g.gh.AddReviewComment("acme/widget", 7, githubtest.Comment{ID: id, Body: "/ask Is this still needed?"})
				body := payload(t, "pull_request_review_comment_outdated.json", ghPayload{PR: 7, CommentID: id, Body: "/ask Is this still needed?",
					Path: "settings/settings.go", StartLine: "3", Line: "5", Head: g.head, Base: g.base})
				code, r := deliver(t, g.url, "pull_request_review_comment", uuid.NewString(), body, testWebhookSecret)
				if code != http.StatusAccepted {
					t.Fatalf("outdated comment: %d %+v", code, r)
				}
				g.wait(r.ConversationID, 1)
				focus := g.scripted.Requests()[len(g.scripted.Requests())-1].Focus
				if focus == nil || len(focus.Anchors) != 1 || focus.Anchors[0] != (chat.Anchor{Path: "settings/settings.go", StartLine: 3, EndLine: 5}) {
					t.Errorf("focus = %+v, want settings/settings.go 3-5", focus)
				}

				// A file-level comment anchors the whole file.
				file := newID()
				g.gh.AddReviewComment("acme/widget", 7, githubtest.Comment{ID: file, Body: "/ask What is this file for?"})
				body = payload(t, "pull_request_review_comment.json", ghPayload{PR: 7, CommentID: file, Body: "/ask What is this file for?",
					Path: "main.go", SubjectType: "file", Head: g.head, Base: g.base})
				if code, r = deliver(t, g.url, "pull_request_review_comment", uuid.NewString(), body, testWebhookSecret); code != http.StatusAccepted {
					t.Fatalf("file comment: %d %+v", code, r)
				}
				g.wait(r.ConversationID, 1)
				focus = g.scripted.Requests()[len(g.scripted.Requests())-1].Focus
				if focus == nil || len(focus.Anchors) != 1 || focus.Anchors[0] != (chat.Anchor{Path: "main.go"}) {
					t.Errorf("focus = %+v, want main.go", focus)
				}
			})

			t.Run("a question on a busy conversation waits for the pending turn", func(t *testing.T) {
				_, body := ask(9, "/ask hold on, why?")
				code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				if code != http.StatusAccepted || r.Turn != 1 {
					t.Fatalf("first: %d %+v", code, r)
				}
				conv := r.ConversationID
				g.waitTurnState(conv, 1, "running")
				_, body = ask(9, "/ask And then?")
				code, r = deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				if code != http.StatusAccepted || r.Status != "waiting" || r.ConversationID != conv {
					t.Fatalf("second: %d %+v, want 202 waiting on %s", code, r, conv)
				}
				close(g.hold)
				g.wait(conv, 1)
				chattest.Eventually(t, "turn 2", func() bool {
					var c struct{ Turns []turnJSON }
					g.do("GET", "/api/v1/conversations/"+conv, nil, http.StatusOK, &c)
					return len(c.Turns) == 2
				})
				if got := g.wait(conv, 2); got.State != "succeeded" || got.Session != "resumed" {
					t.Fatalf("turn 2 = %+v", got)
				}
				chattest.Eventually(t, "both replies", func() bool { return len(withMarker(g.gh.IssueComments("acme/widget", 9))) == 2 })
			})

			t.Run("a failed turn is answered with its reason", func(t *testing.T) {
				_, body := ask(10, "/ask Please fail now.")
				code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				if code != http.StatusAccepted {
					t.Fatalf("ask: %d %+v", code, r)
				}
				if got := g.wait(r.ConversationID, 1); got.State != "failed" {
					t.Fatalf("turn = %+v", got)
				}
				chattest.Eventually(t, "the reply", func() bool { return len(withMarker(g.gh.IssueComments("acme/widget", 10))) == 1 })
				reply := withMarker(g.gh.IssueComments("acme/widget", 10))[0].Body
				if !strings.Contains(reply, "prchat could not answer this question: the agent backend failed.") {
					t.Errorf("reply:\n%s", reply)
				}
				checkReplyLines(t, reply)
			})

			t.Run("an answer the model cut short is not posted as complete", func(t *testing.T) {
				_, body := ask(12, "/ask Is this cut short?")
				code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				if code != http.StatusAccepted {
					t.Fatalf("ask: %d %+v", code, r)
				}
				g.wait(r.ConversationID, 1)
				chattest.Eventually(t, "the reply", func() bool { return len(withMarker(g.gh.IssueComments("acme/widget", 12))) == 1 })
				if reply := withMarker(g.gh.IssueComments("acme/widget", 12))[0].Body; !strings.HasPrefix(reply, "> **This answer is incomplete**") {
					t.Errorf("reply:\n%s", reply)
				}
			})

			t.Run("GitHub answering 5xx to the first posts gets one reply", func(t *testing.T) {
				g.gh.Fail("POST", "/repos/acme/widget/issues/11/comments", http.StatusBadGateway, 2)
				_, body := ask(11, "/ask Why the retry?")
				code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				if code != http.StatusAccepted {
					t.Fatalf("ask: %d %+v", code, r)
				}
				g.wait(r.ConversationID, 1)
				chattest.Eventually(t, "the reply", func() bool { return len(withMarker(g.gh.IssueComments("acme/widget", 11))) == 1 })
				posts := g.gh.CallsTo("POST", "/repos/acme/widget/issues/11/comments")
				var statuses []int
				for _, c := range posts {
					statuses = append(statuses, c.Status)
				}
				if len(posts) != 3 || statuses[0] != 502 || statuses[1] != 502 || statuses[2] != 201 {
					t.Errorf("posts answered %v, want 502, 502, 201", statuses)
				}
				if n := len(g.gh.CallsTo("GET", "/repos/acme/widget/issues/11/comments")); n < 2 {
					t.Errorf("%d looks for an earlier reply before the retries, want 2", n)
				}
				time.Sleep(200 * time.Millisecond) // a while for a duplicate reply to show, not a wait for a condition
				if n := len(withMarker(g.gh.IssueComments("acme/widget", 11))); n != 1 {
					t.Errorf("%d replies, want 1", n)
				}
			})

			t.Run("an unreviewed PR gets a review version from GitHub, seeded", func(t *testing.T) {
				g.gh.AddPull("acme/widget", 8, g.head, g.base)
				_, body := ask(8, "/ask Where is Load called?")
				code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				if code != http.StatusAccepted || r.Turn != 1 {
					t.Fatalf("ask: %d %+v", code, r)
				}
				var rev struct {
					Version   int
					HeadSHA   string `json:"head_sha"`
					Backend   string
					SessionID string `json:"session_id"`
				}
				g.do("GET", "/api/v1/repos/acme/widget/pulls/8/reviews/latest", nil, http.StatusOK, &rev)
				if rev.Version != 1 || rev.HeadSHA != g.head || rev.Backend != "" || rev.SessionID != "" {
					t.Errorf("review = %+v", rev)
				}
				got := g.wait(r.ConversationID, 1)
				if got.State != "succeeded" || got.Session == "forked" {
					t.Fatalf("turn = %+v", got)
				}
				var c struct {
					Backend      string
					SeededReason string `json:"seeded_reason"`
				}
				g.do("GET", "/api/v1/conversations/"+r.ConversationID, nil, http.StatusOK, &c)
				if c.Backend != "local" {
					t.Errorf("conversation backend = %q, want the default, local", c.Backend)
				}
				chattest.Eventually(t, "the reply", func() bool { return len(withMarker(g.gh.IssueComments("acme/widget", 8))) == 1 })
				if reply := withMarker(g.gh.IssueComments("acme/widget", 8))[0].Body; !strings.Contains(reply, "No review was recorded for this pull request, so local answered from the code alone") {
					t.Errorf("the reply does not say the PR had no review:\n%s", reply)
				}
				if len(g.gh.CallsTo("GET", "/repos/acme/widget/pulls/8")) != 1 {
					t.Errorf("PR looked up %d times, want once", len(g.gh.CallsTo("GET", "/repos/acme/widget/pulls/8")))
				}
			})

			t.Run("metrics", func(t *testing.T) {
				chattest.Eventually(t, "the replies' count", func() bool {
					return strings.Contains(string(g.do("GET", "/metrics", nil, http.StatusOK, nil)), `prchat_webhook_replies_total{forge="github",outcome="posted"} 13`)
				})
				metrics := string(g.do("GET", "/metrics", nil, http.StatusOK, nil))
				for _, want := range []string{
					`prchat_webhook_deliveries_total{event="issue_comment",forge="github",outcome="unauthorized"} 3`,
					`prchat_webhook_deliveries_total{event="issue_comment",forge="github",outcome="duplicate"} 10`,
					`prchat_webhook_deliveries_total{event="issue_comment",forge="github",outcome="waiting"} 1`,
					`prchat_webhook_deliveries_total{event="ping",forge="github",outcome="ping"} 2`,
					`prchat_webhook_duplicates_total{forge="github"} 10`,
				} {
					if !strings.Contains(metrics, want) {
						t.Errorf("metrics lack %s", want)
					}
				}
			})
		})
	}
}

// writeKey writes a PEM key file and returns its path.
func writeKey(t *testing.T, pem []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(p, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// bareWithPull makes a bare copy of dir under root/owner/name.git whose
// main is at base and whose PR head is reachable only as refs/pull/pr/head,
// as on GitHub for a PR from a fork.
func bareWithPull(t *testing.T, dir, root, repo string, pr int, head, base string) {
	t.Helper()
	bare := filepath.Join(root, repo+".git")
	for _, args := range [][]string{
		{"clone", "-q", "--bare", dir, bare},
		{"-C", bare, "update-ref", fmt.Sprintf("refs/pull/%d/head", pr), head},
		{"-C", bare, "update-ref", "refs/heads/main", base},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

func TestGitHubAppPrivateRepository(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			const repo, installation = "acme/private", 77
			// ghinstallation renews a token a minute before it expires: one
			// of a minute and renewal lives renewal, time enough for the
			// first question on a loaded machine (2 s was not).
			renewal := chattest.Within(10 * time.Second)
			var cloneURL string
			g := setupGitHub(t, m, func(c *Config, fake *githubtest.Server) {
				c.GitHubToken = ""
				c.GitHubAppID = fake.AppID
				c.GitHubAppPrivateKeyFile = writeKey(t, fake.PrivateKeyPEM())
				c.GitHubAutoRegister = true
				c.AllowFileURLs = true     // the fake git server speaks http://
				c.CloneAllowPrivate = true // ... on 127.0.0.1
				// GitHub's installation tokens live an hour; these a
				// minute and renewal.
				fake.TokenTTL = time.Minute + renewal
				fake.Install(repo, installation)
			})
			root := t.TempDir()
			bareWithPull(t, g.repoDir, root, repo, 8, g.head, g.base)
			cloneURL = g.gh.ServeGit(t, root) + "/" + repo + ".git"
			g.gh.AddPull(repo, 8, g.head, g.base)

			ask := func(question string) {
				t.Helper()
				body := payload(t, "issue_comment.json", ghPayload{Repo: repo, PR: 8, CommentID: 1_000_000 + commentIDs.Add(1), Body: question,
					CloneURL: cloneURL, Private: true, Installation: installation})
				code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				if code != http.StatusAccepted {
					t.Fatalf("ask: %d %+v", code, r)
				}
				if got := g.wait(r.ConversationID, r.Turn); got.State != "succeeded" {
					t.Fatalf("turn = %+v", got)
				}
			}
			ask("/ask Where does Load check the path?")
			first := time.Now()
			chattest.Eventually(t, "the reply", func() bool { return len(withMarker(g.gh.IssueComments(repo, 8))) == 1 })

			// Registered from the event.
			var r struct {
				CloneURL string `json:"clone_url"`
			}
			g.do("GET", "/api/v1/repos/"+repo, nil, http.StatusOK, &r)
			if r.CloneURL != cloneURL {
				t.Errorf("clone_url = %q, want %q", r.CloneURL, cloneURL)
			}
			// The clone came with the installation token.
			var fetched bool
			for _, c := range g.gh.GitCalls() {
				if c.Status == http.StatusOK && strings.HasPrefix(c.Auth, "Basic ") {
					fetched = true
				}
			}
			if !fetched {
				t.Errorf("no authenticated fetch from the git server: %+v", g.gh.GitCalls())
			}
			if n := g.gh.Tokens(); n != 1 {
				t.Errorf("%d installation tokens before the first expired, want 1 (cached)", n)
			}

			// After the token's renewal time the next question gets a new
			// one: the time passing is the behaviour under test.
			time.Sleep(time.Until(first.Add(renewal + 500*time.Millisecond)))
			ask("/ask And in main.go?")
			chattest.Eventually(t, "the second reply", func() bool { return len(withMarker(g.gh.IssueComments(repo, 8))) == 2 })
			if n := g.gh.Tokens(); n != 2 {
				t.Errorf("%d installation tokens, want 2", n)
			}
			used := map[string]bool{}
			for _, c := range g.gh.Calls() {
				if c.Status == http.StatusUnauthorized {
					t.Errorf("GitHub refused %s %s", c.Method, c.Path)
				}
				if strings.HasPrefix(c.Path, "/repos/"+repo+"/issues") || strings.HasPrefix(c.Path, "/repos/"+repo+"/pulls") {
					used[c.Auth] = true
				}
			}
			if len(used) != 2 {
				t.Errorf("the repository's calls used %d tokens, want 2", len(used))
			}
			// The App's own bot account is recognised as prchat.
			body := payload(t, "issue_comment.json", ghPayload{Repo: repo, PR: 8, CommentID: 1_000_000 + commentIDs.Add(1), Body: "/ask Me?",
				Login: "prchat[bot]", UserType: "User", CloneURL: cloneURL, Installation: installation})
			if code, rc := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret); code != http.StatusOK || rc.Status != "ignored" {
				t.Errorf("prchat's own comment: %d %+v", code, rc)
			}
		})
	}
}

func TestGitHubRestartBetweenAnsweringAndPosting(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			g := setupGitHub(t, m, nil)
			g.reviewPR(7)
			g.gh.HoldPosts()
			body := payload(t, "issue_comment.json", ghPayload{PR: 7, CommentID: 1_000_000 + commentIDs.Add(1), Body: "/ask Why?"})
			code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
			if code != http.StatusAccepted {
				t.Fatalf("ask: %d %+v", code, r)
			}
			g.wait(r.ConversationID, 1)
			// GitHub stored the reply but has not answered: prchat stops.
			chattest.Eventually(t, "the held post", func() bool { return len(withMarker(g.gh.IssueComments("acme/widget", 7))) == 1 })
			g.d.Stop()
			g.gh.ReleasePosts()
			if n := len(g.gh.CallsTo("POST", "/repos/acme/widget/issues/7/comments")); n != 1 {
				t.Fatalf("%d posts before the restart, want 1", n)
			}

			d := g.boot(roleOf("serve"), g.cfg)
			g.d, g.url = d, d.URL()
			chattest.Eventually(t, "the comment marked posted", func() bool {
				var state string
				if err := d.store.DB().Table("webhook_comments").Select("state").Scan(&state).Error; err != nil {
					t.Fatal(err)
				}
				return state == "posted"
			})
			if n := len(g.gh.CallsTo("POST", "/repos/acme/widget/issues/7/comments")); n != 1 {
				t.Errorf("%d posts, want 1", n)
			}
			if n := len(withMarker(g.gh.IssueComments("acme/widget", 7))); n != 1 {
				t.Errorf("%d replies, want 1", n)
			}
			if n := len(g.gh.CallsTo("GET", "/repos/acme/widget/issues/7/comments")); n < 1 {
				t.Errorf("the restarted daemon did not look for the earlier reply")
			}
		})
	}
}

func TestGitHubQuestionsCountAgainstTheRepositoryRate(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			g := setupGitHub(t, m, func(c *Config, _ *githubtest.Server) {
				c.RateQuestionsRepo = chat.Rate{Count: 2, Per: time.Hour}
			})
			g.reviewPR(7)
			var statuses []string
			var over int64
			for _, q := range []string{"/ask One?", "/ask Two?", "/ask Three?"} {
				id := 1_000_000 + commentIDs.Add(1)
				body := payload(t, "issue_comment.json", ghPayload{PR: 7, CommentID: id, Body: q})
				code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				if code != http.StatusAccepted && code != http.StatusOK {
					t.Fatalf("%s: %d %+v", q, code, r)
				}
				statuses = append(statuses, r.Status)
				if r.Status == "declined" {
					over = id
					if !strings.Contains(r.Reason, "too many questions about acme/widget; try again in ") {
						t.Errorf("reason = %q", r.Reason)
					}
				}
				if r.Turn > 0 {
					g.wait(r.ConversationID, r.Turn)
				}
			}
			// The limit frees a question only in an hour: the third is
			// declined at once, with a reply saying when to ask again.
			if diff := fmt.Sprint(statuses); diff != "[queued queued declined]" {
				t.Errorf("statuses = %v, want the third declined for the rate", statuses)
			}
			var turns int64
			if err := g.d.store.DB().Table("turns").Count(&turns).Error; err != nil || turns != 2 {
				t.Errorf("%d turns (%v), want 2", turns, err)
			}
			chattest.Eventually(t, "three replies", func() bool { return len(withMarker(g.gh.IssueComments("acme/widget", 7))) == 3 })
			g.settle()
			replies := withMarker(g.gh.IssueComments("acme/widget", 7))
			declined := 0
			for _, r := range replies {
				if strings.Contains(r.Body, "prchat could not answer this question: too many questions about acme/widget; try again in ") &&
					strings.Contains(r.Body, "(trace "+g.trace(over)+")") {
					declined++
				}
			}
			if len(replies) != 3 || declined != 1 {
				t.Errorf("%d replies, %d saying the rate (want 3 and 1):\n%+v", len(replies), declined, replies)
			}
		})
	}
}
