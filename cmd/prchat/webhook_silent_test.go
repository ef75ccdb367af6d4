package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/forge/github/githubtest"
	"github.com/prchat/prchat/forge/gitlab/gitlabtest"
)

// trace returns the trace id of the question of comment id: the id its
// reply and the logs name it by.
func (g *ghEnv) trace(id int64) string {
	g.t.Helper()
	var trace string
	if err := g.d.store.DB().Table("webhook_comments").Select("id").Where("comment_id = ?", id).Scan(&trace).Error; err != nil {
		g.t.Fatal(err)
	}
	return trace
}

// settle waits until every stored question is done (answered, declined or
// given up), and then for the answer of one more question to come through
// the outbox: a reply that a loop would post again has been posted again
// by then.
func (g *ghEnv) settle() {
	g.t.Helper()
	chattest.Eventually(g.t, "every question done", func() bool {
		var n int64
		if err := g.d.store.DB().Table("webhook_comments").Where("state IN ?", []string{chat.CommentReceived, chat.CommentWaiting, chat.CommentQueued}).Count(&n).Error; err != nil {
			g.t.Fatal(err)
		}
		return n == 0
	})
	const repo = "acme/settle"
	if !g.settling {
		g.settling = true
		g.do("POST", "/api/v1/repos", map[string]any{"name": repo, "clone_path": g.repoDir}, http.StatusCreated, nil)
		g.do("POST", "/api/v1/repos/"+repo+"/pulls/1/reviews",
			map[string]any{"head_sha": g.head, "base_sha": g.base, "backend": "scripted", "markdown": "Fine."}, http.StatusCreated, nil)
	}
	before := len(withMarker(g.gh.IssueComments(repo, 1)))
	body := payload(g.t, "issue_comment.json", ghPayload{Repo: repo, PR: 1, CommentID: 1_000_000 + commentIDs.Add(1), Body: "/ask Settled?"})
	if code, r := deliver(g.t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret); code != http.StatusAccepted {
		g.t.Fatalf("settle: %d %+v", code, r)
	}
	chattest.Eventually(g.t, "the settling answer", func() bool { return len(withMarker(g.gh.IssueComments(repo, 1))) == before+1 })
}

// reactions returns the reactions made to comment id.
func reactions(gh *githubtest.Server, id int64) []string {
	var out []string
	for _, re := range gh.Reactions() {
		if re.CommentID == id {
			out = append(out, re.Content)
		}
	}
	return out
}

// TestWebhookNeverSilent: every accepted /ask that prchat cannot answer
// gets exactly one reply in its thread saying why, with its trace id, and
// no turn; none is posted again once the daemon has settled, and what
// cannot be mended by retrying (a clone that is gone) is tried once.
func TestWebhookNeverSilent(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			g := setupGitHub(t, m, nil)

			// A registered repository whose clone is then gone.
			gone := filepath.Join(t.TempDir(), "gone")
			if out, err := exec.Command("git", "clone", "-q", g.repoDir, gone).CombinedOutput(); err != nil {
				t.Fatalf("git clone: %v\n%s", err, out)
			}
			g.do("POST", "/api/v1/repos", map[string]any{"name": "acme/gone", "clone_path": gone}, http.StatusCreated, nil)
			if err := os.RemoveAll(gone); err != nil {
				t.Fatal(err)
			}
			g.gh.AddPull("acme/gone", 5, g.head, g.base)

			type ask struct {
				repo string
				pr   int
				body string
			}
			cases := []struct {
				name string
				ask  ask
				// reason is what the reply says after "prchat could not
				// answer this question: ".
				reason string
			}{
				{"no review could be made: GitHub does not show the PR", ask{"acme/widget", 404, "/ask Why?"},
					"github refused what prchat asked of it to make a review of this pull request"},
				{"the clone is gone", ask{"acme/gone", 5, "/ask Why?"},
					"prchat's clone of acme/gone is missing or cannot be read, so no review of this pull request could be made"},
				{"an unregistered repository", ask{"acme/other", 5, "/ask Why?"},
					"prchat does not know the repository acme/other"},
				{"a bare /ask", ask{"acme/widget", 21, "/ask"},
					"there is no question after /ask"},
				{"a question over the length limit", ask{"acme/widget", 22, "/ask " + strings.Repeat("é", chat.MaxQuestionRunes+1)},
					fmt.Sprintf("the question cannot be asked: question has %d characters; at most %d are allowed", chat.MaxQuestionRunes+1, chat.MaxQuestionRunes)},
			}
			ids := make([]int64, len(cases))
			for i, c := range cases {
				ids[i] = 1_000_000 + commentIDs.Add(1)
				body := payload(t, "issue_comment.json", ghPayload{Repo: c.ask.repo, PR: c.ask.pr, CommentID: ids[i], Body: c.ask.body})
				code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				if code != http.StatusOK && code != http.StatusAccepted {
					t.Fatalf("%s: %d %+v", c.name, code, r)
				}
			}
			check := func(when string) {
				t.Helper()
				for i, c := range cases {
					replies := withMarker(g.gh.IssueComments(c.ask.repo, c.ask.pr))
					if len(replies) != 1 {
						t.Errorf("%s, %s: %d replies, want 1: %+v", c.name, when, len(replies), replies)
						continue
					}
					want := "prchat could not answer this question: " + c.reason
					if r := replies[0].Body; !strings.Contains(r, want) || !strings.Contains(r, "(trace "+g.trace(ids[i])+")") {
						t.Errorf("%s: reply lacks %q or its trace:\n%s", c.name, want, r)
					}
					checkReplyLines(t, replies[0].Body)
				}
			}
			for i, c := range cases {
				chattest.Eventually(t, c.name+": the reply", func() bool { return len(withMarker(g.gh.IssueComments(c.ask.repo, c.ask.pr))) > 0 })
				// Declined: nothing more to do.
				chattest.Eventually(t, c.name+": the question done", func() bool { return g.commentState(chat.ForgeGitHub, ids[i]) == chat.CommentFailed })
			}
			check("at once")
			if n := g.count("turns"); n != 0 {
				t.Errorf("%d turns", n)
			}
			lookups := len(g.gh.CallsTo("GET", "/repos/acme/gone/pulls/5"))
			g.settle()
			check("after settling")
			if n := len(g.gh.CallsTo("GET", "/repos/acme/gone/pulls/5")); n != 1 || lookups != 1 {
				t.Errorf("the PR whose clone is gone was looked up %d times, then %d, want once", lookups, n)
			}
			if !strings.Contains(string(g.do("GET", "/metrics", nil, http.StatusOK, nil)), fmt.Sprintf(`prchat_webhook_replies_total{forge="github",outcome="declined"} %d`, len(cases))) {
				t.Errorf("metrics do not count %d declined replies", len(cases))
			}
		})
	}
}

// TestWebhookUnregisteredOncePerPR: questions from a repository prchat does
// not know get one reply per pull request, however many are asked there and
// however they arrive (together, later, again after a restart), and no 👀.
func TestWebhookUnregisteredOncePerPR(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			g := setupGitHub(t, m, nil)
			ask := func(pr int) (int64, int, receipt) {
				id := 1_000_000 + commentIDs.Add(1)
				body := payload(t, "issue_comment.json", ghPayload{Repo: "acme/other", PR: pr, CommentID: id, Body: "/ask Why?"})
				code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				return id, code, r
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			var statuses []string
			var all []int64
			for range 4 {
				wg.Go(func() {
					id, code, r := ask(5)
					mu.Lock()
					defer mu.Unlock()
					all = append(all, id)
					statuses = append(statuses, fmt.Sprint(code, " ", r.Status))
					if code != http.StatusOK || !strings.Contains(r.Reason, "prchat does not know the repository acme/other") {
						t.Errorf("ask: %d %+v", code, r)
					}
				})
			}
			wg.Wait()
			declined := 0
			for _, s := range statuses {
				if s == "200 declined" {
					declined++
				}
			}
			if declined != 1 {
				t.Errorf("statuses %v, want one declined (the rest said once already)", statuses)
			}
			chattest.Eventually(t, "the reply", func() bool { return len(withMarker(g.gh.IssueComments("acme/other", 5))) > 0 })
			// Later, and after a restart: still said once.
			_, _, r := ask(5)
			if r.Status != "ignored" || !strings.Contains(r.Reason, "said once in this pull request") {
				t.Errorf("a later ask: %+v", r)
			}
			g.d.Stop()
			d := g.boot(roleOf("serve"), g.cfg)
			g.d, g.url = d, d.URL()
			if _, _, r := ask(5); r.Status != "ignored" {
				t.Errorf("an ask after the restart: %+v", r)
			}
			// Another PR is told too.
			if _, _, r := ask(6); r.Status != "declined" {
				t.Errorf("another PR: %+v", r)
			}
			chattest.Eventually(t, "the other PR's reply", func() bool { return len(withMarker(g.gh.IssueComments("acme/other", 6))) > 0 })
			g.settle()
			for pr, want := range map[int]int{5: 1, 6: 1} {
				if n := len(withMarker(g.gh.IssueComments("acme/other", pr))); n != want {
					t.Errorf("PR %d: %d replies, want %d", pr, n, want)
				}
			}
			for _, id := range all {
				if re := reactions(g.gh, id); len(re) != 0 {
					t.Errorf("comment %d has reactions %v, want none", id, re)
				}
			}
		})
	}
}

// TestWebhookOneReviewForConcurrentAsks: /asks arriving together on a PR
// with no review make one review version.
func TestWebhookOneReviewForConcurrentAsks(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			g := setupGitHub(t, m, nil)
			g.gh.AddPull("acme/widget", 31, g.head, g.base)
			var wg sync.WaitGroup
			for i := 0; i < 4; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					body := payload(t, "issue_comment.json", ghPayload{PR: 31, CommentID: 1_000_000 + commentIDs.Add(1), Body: "/ask Why?"})
					deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
				}()
			}
			wg.Wait()
			chattest.Eventually(t, "four replies", func() bool { return len(withMarker(g.gh.IssueComments("acme/widget", 31))) == 4 })
			var versions int64
			if err := g.d.store.DB().Table("reviews").Where("pr = ?", 31).Count(&versions).Error; err != nil || versions != 1 {
				t.Errorf("%d review versions (%v), want 1", versions, err)
			}
		})
	}
}

// TestWebhookOneReviewAcrossProcesses: /asks arriving together on a PR
// with no review, taken by two processes on one Postgres, make one review
// version, and each is answered once.
func TestWebhookOneReviewAcrossProcesses(t *testing.T) {
	t.Parallel()
	ms := modes(t)
	m := ms[len(ms)-1]
	if !m.real {
		t.Skip("two processes share a database only on Postgres (PRCHAT_TEST_DATABASE_URL, PRCHAT_TEST_REDIS_URL)")
	}
	g := setupGitHub(t, m, nil)
	other := g.cfg
	other.DataDir, other.WorkerID = t.TempDir(), "w-"+uuid.NewString()[:8]
	second := g.boot(roleOf("serve"), other)
	g.gh.AddPull("acme/widget", 32, g.head, g.base)
	const asks = 8
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range asks {
		url := g.url
		if i%2 == 1 {
			url = second.URL()
		}
		body := payload(t, "issue_comment.json", ghPayload{PR: 32, CommentID: 1_000_000 + commentIDs.Add(1), Body: fmt.Sprintf("/ask Why, %d?", i)})
		wg.Go(func() {
			<-start
			if code, r := deliver(t, url, "issue_comment", uuid.NewString(), body, testWebhookSecret); code != http.StatusAccepted {
				t.Errorf("ask %d: %d %+v", i, code, r)
			}
		})
	}
	close(start)
	wg.Wait()
	chattest.Eventually(t, "every answer", func() bool { return len(withMarker(g.gh.IssueComments("acme/widget", 32))) >= asks })
	var versions int64
	if err := g.d.store.DB().Table("reviews").Where("pr = ?", 32).Count(&versions).Error; err != nil || versions != 1 {
		t.Errorf("%d review versions (%v), want 1", versions, err)
	}
	g.settle()
	if n := len(withMarker(g.gh.IssueComments("acme/widget", 32))); n != asks {
		t.Errorf("%d replies, want %d", n, asks)
	}
}

// TestGitLabWebhookNeverSilent: GitLab's declined questions get their reply
// in the note's discussion: a project prchat does not know once per merge
// request, a bare /ask each time.
func TestGitLabWebhookNeverSilent(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			fake := gitlabtest.New(t)
			e := prepare(t, m, func(c *Config) {
				c.GitLabSecret = testGitLabSecret
				c.GitLabToken = fake.Token
				c.GitLabAPIURL = fake.APIURL()
			})
			e.scripted.Fallback = func(chat.RunRequest) scripted.Step { return scripted.Step{Answer: goodAnswer("Answered.")} }
			e.serve(roleOf("serve"))
			note := func(repo string, iid int, discussion, text string) receipt {
				t.Helper()
				id := 2_000_000 + commentIDs.Add(1)
				fake.AddDiscussion(repo, iid, discussion, gitlabtest.Note{ID: id, Body: text})
				body := glNotePayload(t, glPayload{Repo: repo, IID: iid, NoteID: id, Discussion: discussion, Body: text})
				code, r := deliverGitLab(t, e.url, uuid.NewString(), body, testGitLabSecret)
				if code != http.StatusOK {
					t.Fatalf("%s!%d %q: %d %+v", repo, iid, text, code, r)
				}
				return r
			}
			if r := note("acme/other", 5, "d1", "/ask Why?"); r.Status != "declined" || !strings.Contains(r.Reason, "prchat does not know the repository acme/other") {
				t.Errorf("first note of an unknown project: %+v", r)
			}
			if r := note("acme/other", 5, "d2", "/ask And this?"); r.Status != "ignored" || !strings.Contains(r.Reason, "said once in this pull request") {
				t.Errorf("second note: %+v", r)
			}
			if r := note("acme/widget", 7, "d3", "/ask"); r.Status != "declined" {
				t.Errorf("a bare /ask: %+v", r)
			}
			// Nothing is left to do (so nothing is posted again).
			var due int64
			if err := e.d.store.DB().Table("webhook_comments").Where("state <> ?", chat.CommentFailed).Count(&due).Error; err != nil || due != 0 {
				t.Errorf("%d questions not done (%v)", due, err)
			}
			for _, c := range []struct {
				repo       string
				iid        int
				discussion string
				replies    int
				says       string
			}{
				{"acme/other", 5, "d1", 1, "prchat could not answer this question: prchat does not know the repository acme/other"},
				{"acme/other", 5, "d2", 0, ""},
				{"acme/widget", 7, "d3", 1, "prchat could not answer this question: there is no question after /ask"},
			} {
				got := withGitLabMarker(fake.Notes(c.repo, c.iid, c.discussion))
				if len(got) != c.replies || (c.replies == 1 && !strings.Contains(got[0].Body, c.says)) {
					t.Errorf("%s!%d %s: replies %+v, want %d saying %q", c.repo, c.iid, c.discussion, got, c.replies, c.says)
				}
			}
		})
	}
}

// TestWebhookAutoRegisterRefused: a repository that cannot be registered
// from its event (its clone URL leads to a private address) is said so
// once per pull request, and nothing is registered.
func TestWebhookAutoRegisterRefused(t *testing.T) {
	t.Parallel()
	m := modes(t)[0]
	g := setupGitHub(t, m, func(c *Config, _ *githubtest.Server) { c.GitHubAutoRegister = true })
	for i := range 2 {
		body := payload(t, "issue_comment.json", ghPayload{Repo: "acme/inside", PR: 3, CommentID: 1_000_000 + commentIDs.Add(1),
			Body: "/ask Why?", CloneURL: "https://127.0.0.1/acme/inside.git"})
		code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
		want := map[int]string{0: "declined", 1: "ignored"}[i]
		if code != http.StatusOK || r.Status != want || !strings.Contains(r.Reason, "prchat could not register the repository acme/inside from the event") {
			t.Errorf("ask %d: %d %+v, want %s", i, code, r, want)
		}
	}
	replies := withMarker(g.gh.IssueComments("acme/inside", 3))
	if len(replies) != 1 || !strings.Contains(replies[0].Body, "prchat could not answer this question: prchat could not register the repository acme/inside") {
		t.Errorf("replies: %+v", replies)
	}
	g.do("GET", "/api/v1/repos/acme/inside", nil, http.StatusNotFound, nil)
}

// TestWebhookConversationDeleted: a question whose conversation is deleted
// before its answer is posted gets one reply saying so.
func TestWebhookConversationDeleted(t *testing.T) {
	t.Parallel()
	m := modes(t)[0]
	g := setupGitHub(t, m, nil)
	t.Cleanup(func() { close(g.hold) })
	g.reviewPR(7)
	id := 1_000_000 + commentIDs.Add(1)
	body := payload(t, "issue_comment.json", ghPayload{PR: 7, CommentID: id, Body: "/ask hold on, why?"})
	code, r := deliver(t, g.url, "issue_comment", uuid.NewString(), body, testWebhookSecret)
	if code != http.StatusAccepted || r.Turn != 1 {
		t.Fatalf("ask: %d %+v", code, r)
	}
	g.waitTurnState(r.ConversationID, 1, "running")
	g.do("DELETE", "/api/v1/conversations/"+r.ConversationID, nil, http.StatusNoContent, nil)
	chattest.Eventually(t, "the question done", func() bool { return g.commentState(chat.ForgeGitHub, id) == chat.CommentFailed })
	g.settle()
	replies := withMarker(g.gh.IssueComments("acme/widget", 7))
	if len(replies) != 1 || !strings.Contains(replies[0].Body, "prchat could not answer this question: its conversation was deleted before it was answered. (trace "+g.trace(id)+")") {
		t.Errorf("replies: %+v", replies)
	}
}
