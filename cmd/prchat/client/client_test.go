package client

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/chat"
)

// TestDoReturnsTheContractsError: an error answer becomes "code: message",
// and the token goes out as a bearer token.
func TestDoReturnsTheContractsError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"error":{"code":"busy","message":"a turn is pending"}}`))
	}))
	defer srv.Close()
	err := New(srv.URL+"/", "tok").Do(t.Context(), "POST", "/api/v1/x", map[string]string{"a": "b"}, nil)
	if err == nil || err.Error() != "busy: a turn is pending" {
		t.Errorf("Do = %v, want busy: a turn is pending", err)
	}
	err = New(srv.URL, "").Do(t.Context(), "GET", "/api/v1/x", nil, nil)
	if err == nil || err.Error() != "GET /api/v1/x: HTTP 401" {
		t.Errorf("Do without a token = %v, want HTTP 401", err)
	}
}

// TestNotesShownOnce: a note line Progress showed is not printed again
// with the turn; one it did not show is.
func TestNotesShownOnce(t *testing.T) {
	t.Parallel()
	var live, final bytes.Buffer
	p := NewProgress(&live, false)
	p.event(map[string]any{"type": chat.EventNote, "text": "seeded"})
	p.event(map[string]any{"type": chat.EventNote, "text": "seeded"})
	PrintTurn(&final, chat.Turn{State: chat.StateSucceeded, Answer: &chat.Answer{AnswerMarkdown: "ok"}, Note: "seeded\nno session kept"}, false, p)
	if diff := cmp.Diff("note: seeded\n", live.String()); diff != "" {
		t.Errorf("live (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("ok\n\nno session kept\n", final.String()); diff != "" {
		t.Errorf("printed turn (-want +got):\n%s", diff)
	}
	final.Reset()
	PrintTurn(&final, chat.Turn{State: chat.StateFailed, Reason: "timeout", Note: "took too long"}, false, nil)
	if diff := cmp.Diff("\ntook too long\nThe turn failed (timeout).\n", final.String()); diff != "" {
		t.Errorf("printed failed turn (-want +got):\n%s", diff)
	}
}

func TestRenderMarkdown(t *testing.T) {
	t.Parallel()
	md := "## Why\n\nLoad **refuses** it:\n\n- returns `errEmptyPath`\n\n```go\nreturn err\n```\n"
	want := "Why\n\nLoad refuses it:\n\n• returns errEmptyPath\n\n    return err"
	if diff := cmp.Diff(want, renderMarkdown(md, false)); diff != "" {
		t.Errorf("plain (-want +got):\n%s", diff)
	}
	if got := renderMarkdown("**b**", true); !strings.Contains(got, bold+"b\033[0m") {
		t.Errorf("terminal rendering of bold = %q", got)
	}
}
