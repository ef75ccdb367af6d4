package store_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/store/storetest"
)

// TestOutageIsUnavailable: while the database cannot be reached every kind
// of store call (read, write, transaction, ping) fails with
// chat.CodeUnavailable and a message that names no host, port, user or
// database; once it is back the same store works again.
func TestOutageIsUnavailable(t *testing.T) {
	t.Parallel()
	s, proxy := storetest.NewPostgresBehindProxy(t)
	u, err := url.Parse(os.Getenv(storetest.EnvDatabaseURL)) // what no message may name
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := map[string]func() error{
		"ping":    func() error { return s.Ping(ctx) },
		"read":    func() error { _, err := s.Repositories(ctx); return err },
		"pending": func() error { _, err := s.PendingTurns(ctx); return err },
		"write": func() error {
			_, err := s.UpsertRepository(ctx, &chat.Repository{Name: "o/r", ClonePath: "/x"})
			return err
		},
		"transaction": func() error { return s.DeleteConversation(ctx, "00000000-0000-0000-0000-000000000000") },
		"append events": func() error {
			return s.AppendEvents(ctx, "00000000-0000-0000-0000-000000000000", 1, []chat.Event{{Seq: 1, Type: chat.EventNote, Text: "x"}})
		},
		"claim (turn)": func() error {
			_, err := s.ClaimTurn(ctx, "00000000-0000-0000-0000-000000000000", "w/1", nil)
			return err
		},
	}
	for name, call := range calls {
		if err := call(); err != nil && chat.ErrorCode(err) != chat.CodeNotFound {
			t.Fatalf("%s before the outage: %v", name, err)
		}
	}

	proxy.Cut()
	for name, call := range calls {
		err := call()
		if code := chat.ErrorCode(err); code != chat.CodeUnavailable {
			t.Errorf("%s during the outage: code %q (%v), want unavailable", name, code, err)
			continue
		}
		msg := chat.ErrorMessage(err)
		for _, secret := range []string{u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), "127.0.0.1"} {
			if secret != "" && strings.Contains(msg, secret) {
				t.Errorf("%s: client message %q names %q", name, msg, secret)
			}
		}
	}

	proxy.Restore()
	for name, call := range calls {
		if err := call(); err != nil && chat.ErrorCode(err) != chat.CodeNotFound {
			t.Errorf("%s after the outage: %v", name, err)
		}
	}
}
