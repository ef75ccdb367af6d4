package codex_test

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/codex"
	"github.com/prchat/prchat/agentsession/codex/codextest"
	"github.com/prchat/prchat/agentsession/fakeapi/responses"
	"github.com/prchat/prchat/chat"
)

// TestConformance runs the shared backend suite against the real CLI, each
// backend with a fake API of its own that Program and Hang script.
func TestConformance(t *testing.T) {
	t.Parallel()
	codextest.Bin(t)
	var apis sync.Map // *codex.Backend -> *responses.Server
	api := func(t *testing.T, b chat.Backend) *responses.Server {
		s, ok := apis.Load(b)
		if !ok {
			t.Fatalf("backend %p was not made by the harness", b)
		}
		return s.(*responses.Server)
	}
	agentsessiontest.Run(t, agentsessiontest.Harness{
		New: func(t *testing.T) chat.Backend {
			s := responses.New(t)
			b, err := codex.New(codextest.Config(t, s))
			if err != nil {
				t.Fatal(err)
			}
			apis.Store(b, s)
			return b
		},
		Sessions: true,
		Program: func(t *testing.T, b chat.Backend, a chat.Answer) {
			raw, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			api(t, b).Push(
				responses.Reply{Calls: []responses.Call{responses.Shell("cat config/config.go")}},
				responses.Reply{Text: string(raw)},
			)
		},
		Hang: func(t *testing.T, b chat.Backend) { api(t, b).Push(responses.Reply{Hang: true}) },
	})
}
