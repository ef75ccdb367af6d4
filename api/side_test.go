package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
)

// TestAnchorSide: a focus anchor's side (head by default, or base for lines
// the PR removed) is taken, stored and returned, and the agent's prompt
// names the commit each side's lines are in; any other side is refused and
// creates nothing.
func TestAnchorSide(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review("scripted", nil)
	head, base := f.repo.Head(), f.repo.Commits[0]
	anchors := []chat.Anchor{
		{Path: "settings/settings.go", StartLine: 3, EndLine: 3, Side: chat.SideBase},
		{Path: "settings/settings.go", StartLine: 8, EndLine: 12},
		{Path: "main.go", StartLine: 4, Side: chat.SideHead},
	}
	var out struct {
		Conversation struct{ ID string }
		Turn         struct{ Focus *chat.Focus }
	}
	f.do("POST", fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews/%d/conversations", repoName, v),
		map[string]any{"question": "What did the removed comment say?", "focus": map[string]any{"kind": "section", "anchors": anchors}},
		http.StatusAccepted, &out)
	want := &chat.Focus{Kind: chat.FocusSection, Anchors: anchors}
	if diff := cmp.Diff(want, out.Turn.Focus); diff != "" {
		t.Errorf("focus answered (-want +got):\n%s", diff)
	}
	f.scripted.Push(scripted.Step{Answer: goodAnswer("It said: Load reads the file.")})
	f.settle(out.Conversation.ID, 1)
	var got struct{ Focus *chat.Focus }
	f.do("GET", "/api/v1/conversations/"+out.Conversation.ID+"/turns/1", nil, http.StatusOK, &got)
	if diff := cmp.Diff(want, got.Focus); diff != "" {
		t.Errorf("focus stored (-want +got):\n%s", diff)
	}
	reqs := f.scripted.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d agent calls, want 1", len(reqs))
	}
	if diff := cmp.Diff(want, reqs[0].Focus); diff != "" {
		t.Errorf("focus the agent got (-want +got):\n%s", diff)
	}
	for _, s := range []string{
		`"side":"base"`,
		`anchors with "side": "base" are files and lines of the pull request's base commit ` + base,
		`anchors without "side": "base" are files and lines of the pull request's head commit ` + head,
	} {
		if !strings.Contains(reqs[0].Prompt, s) {
			t.Errorf("the prompt lacks %q:\n%s", s, reqs[0].Prompt)
		}
	}

	// Any other side is refused, and nothing is made.
	for _, side := range []any{"LEFT", "old", "", 1} {
		body := map[string]any{"question": "q", "focus": map[string]any{"kind": "stop", "anchors": []any{map[string]any{"path": "a.go", "start_line": 2, "side": side}}}}
		r := f.c.send(t, "POST", fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews/%d/conversations", repoName, v), body)
		if side == "" {
			if r.status != http.StatusAccepted {
				t.Errorf("an empty side (the default) = %d %s", r.status, r.body)
			}
			continue
		}
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"code":"invalid"`) {
			t.Errorf("side %v = %d %s, want 400 invalid", side, r.status, r.body)
		}
	}
	var list struct{ Conversations []struct{ ID string } }
	f.do("GET", "/api/v1/repos/"+repoName+"/pulls/7/conversations", nil, http.StatusOK, &list)
	if len(list.Conversations) != 2 {
		t.Errorf("%d conversations, want 2 (the refused sides made none)", len(list.Conversations))
	}
}
