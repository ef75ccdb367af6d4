package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
)

// TestStoredKeysAreMaskedByValue (issue: a provider key stored through the
// API was never added to the masker's values): a key stored through the
// API is masked in the next answer and its transcript; one stored by
// another process of the deployment (written to the database directly) is
// masked once the keys are read again, within a second or so; a key
// replaced stays masked.
func TestStoredKeysAreMaskedByValue(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Now()}
	f := setup(t, func(o *options) { o.now = clock.Now })
	v := f.review("scripted", nil)
	const viaAPI, viaOther, replaced = "zk-Qm3vT8wLp2Rn7Xc4Hb9", "zk-Yt6Gd1Ks5Vw0Pe8Jq3", "zk-Lr2Nc7Bx4Mz9Fa1Tu6"
	f.do("POST", "/api/v1/providers/litellm/key", map[string]any{"key": replaced}, http.StatusNoContent, nil)
	f.do("POST", "/api/v1/providers/litellm/key", map[string]any{"key": viaAPI}, http.StatusNoContent, nil)

	leak := func(turn int, conv, key string) string {
		t.Helper()
		text := "The config holds " + key + " and " + replaced + "."
		f.scripted.Push(scripted.Step{
			Events: []chat.Event{{Type: chat.EventTextDelta, Text: text}, {Type: chat.EventToolResult, ToolID: "t", ToolName: "Read", Summary: "KEY=" + key}},
			Answer: goodAnswer(text),
		})
		if turn == 1 {
			conv = f.ask(v, "What is in the config?")
		} else {
			f.next(conv, "And now?")
		}
		got := f.settle(conv, turn)
		if got.State != "succeeded" {
			t.Fatalf("turn = %+v", got)
		}
		body := string(f.do("GET", "/api/v1/conversations/"+conv, nil, http.StatusOK, nil)) +
			string(f.do("GET", "/api/v1/conversations/"+conv+"/turns/1/transcript", nil, http.StatusOK, nil))
		for _, k := range []string{key, replaced} {
			if strings.Contains(body, k) {
				t.Errorf("the stored key %s reaches a client: %.300s", k, body)
			}
		}
		return conv
	}
	conv := leak(1, "", viaAPI)

	// Another process stores a key: written to the settings directly.
	sealer, err := chat.NewSealer([]byte("a test secret of 32 bytes or so."))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.SetProviderKey(context.Background(), "ollama", sealer.Seal("ollama", viaOther)); err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Second) // the keys are trusted for a second before they are read again
	leak(2, conv, viaOther)
}
