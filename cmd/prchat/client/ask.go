package client

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/cmd/internal/cliflag"
)

// askOptions are the flags of `prchat ask`.
type askOptions struct {
	server       string
	token        string
	repo         string
	pr           int
	version      string
	conversation string
	provider     string
	model        string
	json         bool
	noStream     bool
	tty          bool
}

const askUsage = `Usage: prchat ask [flags] "question"

Asks a question about a pull request's review (a new conversation on its
latest review version unless --version is given), or the next question of a
conversation (--conversation). Streams the agent's steps, then prints the
answer and its citations. Exits 0 when the turn succeeded, 1 when it failed
or was cancelled, 2 on a mistake in the command line.

Environment:
  PRCHAT_SERVER  the server's URL, as --server
  PRCHAT_TOKEN   the API token sent as a bearer token; a server that has
                 tokens needs one of scope ask (prchat token create)
  NO_COLOR       set: no colours or styles in the answer

Flags:
`

// Ask is `prchat ask`: args are its command line after "ask", getenv
// reads PRCHAT_SERVER, PRCHAT_TOKEN and NO_COLOR. A mistake in args is a
// UsageError, a turn that did not succeed a TurnFailed.
func Ask(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var o askOptions
	fs := flag.NewFlagSet("prchat ask", flag.ContinueOnError)
	fs.StringVar(&o.server, "server", cmp.Or(getenv("PRCHAT_SERVER"), "http://127.0.0.1:8080"), "prchat server URL (PRCHAT_SERVER)")
	fs.StringVar(&o.repo, "repo", "", "repository owner/name")
	fs.IntVar(&o.pr, "pr", 0, "pull request number")
	fs.StringVar(&o.version, "version", "latest", "review version")
	fs.StringVar(&o.conversation, "conversation", "", "continue this conversation")
	fs.StringVar(&o.provider, "provider", "", "backend for this turn only")
	fs.StringVar(&o.model, "model", "", "model for this turn only")
	fs.BoolVar(&o.json, "json", false, "print the final turn as JSON")
	fs.BoolVar(&o.noStream, "no-stream", false, "long-poll instead of streaming")
	fs.Usage = func() { fmt.Fprint(fs.Output(), askUsage); cliflag.Print(fs.Output(), fs) }
	if err := cliflag.Parse(fs, args, stdout); err != nil {
		return err
	}
	o.token = getenv("PRCHAT_TOKEN")
	question := strings.TrimSpace(strings.Join(fs.Args(), " "))
	switch {
	case question == "":
		return UsageError{Msg: "a question is required"}
	case o.conversation == "" && (o.repo == "" || o.pr < 1):
		return UsageError{Msg: "give --repo and --pr for a new conversation, or --conversation"}
	}
	server, err := ServerURL(o.server)
	if err != nil {
		return UsageError{Msg: err.Error()}
	}
	// The spinner goes to stderr, the answer to stdout: each styled only
	// where it goes to a terminal.
	o.tty = Styled(stdout, getenv)
	c := New(server, o.token)

	body := map[string]any{"question": question}
	if o.provider != "" {
		body["provider"] = o.provider
	}
	if o.model != "" {
		body["model"] = o.model
	}
	var conv string
	var turn int
	if o.conversation != "" {
		var out struct{ Turn chat.Turn }
		if err := c.Do(ctx, "POST", "/api/v1/conversations/"+url.PathEscape(o.conversation)+"/turns", body, &out); err != nil {
			return err
		}
		conv, turn = o.conversation, out.Turn.Number
	} else {
		var out struct {
			Conversation chat.Conversation
			Turn         chat.Turn
		}
		path := fmt.Sprintf("/api/v1/repos/%s/pulls/%d/reviews/%s/conversations", o.repo, o.pr, url.PathEscape(o.version))
		if err := c.Do(ctx, "POST", path, body, &out); err != nil {
			return err
		}
		conv, turn = out.Conversation.ID, out.Turn.Number
	}
	if !o.json {
		fmt.Fprintf(stderr, "conversation %s, turn %d\n", conv, turn)
	}

	var t chat.Turn
	sp := NewProgress(stderr, IsTerminal(stderr))
	if o.noStream || o.json {
		t, err = c.Poll(ctx, conv, turn)
	} else {
		t, err = c.Stream(ctx, conv, turn, sp)
	}
	if err != nil {
		return err
	}
	if o.json {
		raw, _ := json.MarshalIndent(t, "", "  ")
		fmt.Fprintf(stdout, "%s\n", raw)
	} else {
		PrintTurn(stdout, t, o.tty, sp)
	}
	if t.State != chat.StateSucceeded {
		return TurnFailed{Turn: t}
	}
	return nil
}

// TurnFailed is a turn that did not succeed.
type TurnFailed struct{ Turn chat.Turn }

func (e TurnFailed) Error() string {
	return fmt.Sprintf("the turn %s: %s", e.Turn.State, cmp.Or(string(e.Turn.Reason), e.Turn.Note))
}

// UsageError is a mistake in the command line.
type UsageError = cliflag.UsageError
