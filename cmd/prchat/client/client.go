// Package client is prchat's command-line clients of its HTTP API: prchat
// ask (Ask) and prchat review record (Review). It speaks the API for them:
// requests and the contract's errors, a turn's long poll and event stream,
// and a settled turn printed for a terminal.
package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prchat/prchat/chat"
	"golang.org/x/term"
)

// ServerURL checks the URL of a prchat server (--server, PRCHAT_SERVER): an
// http:// or https:// URL with a host. A bare host:port is refused with
// the URL it likely meant, rather than guessed at: the token would go in
// the clear to a host that may want https.
func ServerURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return strings.TrimRight(raw, "/"), nil
	}
	if !strings.Contains(raw, "://") {
		return "", fmt.Errorf("the server %q (--server, PRCHAT_SERVER) needs its scheme: http://%s, or https:// behind TLS", raw, raw)
	}
	return "", fmt.Errorf("the server %q (--server, PRCHAT_SERVER) is not an http:// or https:// URL with a host", raw)
}

// Styled reports whether output to w may carry terminal styles: w is a
// terminal and NO_COLOR (https://no-color.org) is unset or empty.
func Styled(w io.Writer, getenv func(string) string) bool {
	return IsTerminal(w) && getenv("NO_COLOR") == ""
}

// IsTerminal reports whether w is a terminal (not merely a character
// device: /dev/null is one too).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Client speaks to a prchat server.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New returns a client of the prchat server at base (its URL), which
// sends token (if any) as a bearer token.
func New(base, token string) *Client {
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{}}
}

func (c *Client) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = strings.NewReader(string(raw))
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// Do sends a request to the API path and decodes its JSON answer into
// out, or returns the contract's error as "code: message".
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.unreachable(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string }
		}
		msg := fmt.Sprintf("%s %s: HTTP %d", method, path, resp.StatusCode)
		if json.Unmarshal(raw, &e) == nil && e.Error.Code != "" {
			msg = e.Error.Code + ": " + e.Error.Message
		}
		if resp.StatusCode == http.StatusUnauthorized {
			if c.token == "" {
				return errors.New(msg + " (this server needs an API token: set PRCHAT_TOKEN to one; prchat token create makes it)")
			}
			return errors.New(msg + " (the token in PRCHAT_TOKEN is unknown or revoked)")
		}
		return errors.New(msg)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// unreachable explains an error of a request that got no answer: no server
// listening, a name that does not resolve, a timeout.
func (c *Client) unreachable(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	reason := err.Error()
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns):
		reason = "no such host " + dns.Name
	case errors.As(err, &op) && op.Err != nil:
		reason = op.Err.Error()
		var sys *os.SyscallError
		if errors.As(op.Err, &sys) {
			reason = sys.Err.Error()
		}
	}
	return fmt.Errorf("cannot reach prchat at %s (%s): is prchat serve running at %s?", c.base, reason, c.base)
}

// Put sends body, of contentType, to the API path with PUT and returns the
// contract's error as "code: message" (the answer's body is not read).
func (c *Client) Put(ctx context.Context, path, contentType string, body io.Reader) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.unreachable(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal(raw, &e) == nil && e.Error.Code != "" {
			return fmt.Errorf("%s: %s", e.Error.Code, e.Error.Message)
		}
		return fmt.Errorf("PUT %s: HTTP %d", path, resp.StatusCode)
	}
	return nil
}

// Poll long-polls turn n of conversation conv until it settles.
func (c *Client) Poll(ctx context.Context, conv string, n int) (chat.Turn, error) {
	for {
		var t chat.Turn
		if err := c.Do(ctx, "GET", fmt.Sprintf("/api/v1/conversations/%s/turns/%d?wait=30s", url.PathEscape(conv), n), nil, &t); err != nil {
			return t, err
		}
		if t.State.Final() {
			return t, nil
		}
	}
}

// maxHintedReconnects bounds the reconnects a stopping server asks for.
const maxHintedReconnects = 50

// errReconnect is what follow returns when the server ended the stream
// with its reconnect hint (it stops; another instance or its restart
// serves the rest).
var errReconnect = errors.New("the server asked to reconnect")

// errEndedEarly is what follow returns for a stream that the server ended
// with neither a final event nor the reconnect hint: it broke, or the
// client had the turn's final event already (the server then sends
// nothing twice). Stream tells the two apart by reading the turn.
var errEndedEarly = errors.New("the event stream ended early")

// Stream follows the events of turn n of conversation conv, showing them
// on sp, reconnecting with Last-Event-ID when the connection drops or the
// server, stopping, asks for it. It returns the settled turn.
func (c *Client) Stream(ctx context.Context, conv string, n int, sp *Progress) (chat.Turn, error) {
	defer sp.clear()
	last := ""
	hinted := 0
	for attempt := 0; ; attempt++ {
		retry := time.Duration(attempt+1) * 300 * time.Millisecond
		final, err := c.follow(ctx, conv, n, &last, &retry, sp)
		if final {
			break
		}
		if ctx.Err() != nil {
			return chat.Turn{}, ctx.Err()
		}
		if errors.Is(err, errEndedEarly) {
			// A settled turn has nothing more to send: its stream ends at
			// once for a client past the final event.
			var t chat.Turn
			path := fmt.Sprintf("/api/v1/conversations/%s/turns/%d", url.PathEscape(conv), n)
			if c.Do(ctx, "GET", path, nil, &t) == nil && t.State.Final() {
				sp.clear()
				return t, nil
			}
		}
		if errors.Is(err, errReconnect) && hinted < maxHintedReconnects {
			// Not a failure: wait as the server said and start over.
			hinted++
			attempt = -1
		} else if attempt >= 5 {
			return chat.Turn{}, fmt.Errorf("follow the turn's events: %w", err)
		}
		select {
		case <-ctx.Done():
			return chat.Turn{}, ctx.Err()
		case <-time.After(retry):
		}
	}
	sp.clear()
	var t chat.Turn
	err := c.Do(ctx, "GET", fmt.Sprintf("/api/v1/conversations/%s/turns/%d", url.PathEscape(conv), n), nil, &t)
	return t, err
}

// follow reads one connection of the event stream; final is true once the
// done or error event arrived. A stream that ends with the server's
// reconnect hint returns errReconnect and sets *retry to the wait it asked
// for.
func (c *Client) follow(ctx context.Context, conv string, n int, last *string, retry *time.Duration, sp *Progress) (final bool, err error) {
	req, err := c.request(ctx, "GET", fmt.Sprintf("/api/v1/conversations/%s/turns/%d/events", url.PathEscape(conv), n), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *last != "" {
		req.Header.Set("Last-Event-ID", *last)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, c.unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		// The client has the final event already: nothing more will come.
		return false, errEndedEarly
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("events: HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var id, data string
	var hinted bool
	hintedRetry := *retry
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "retry: "):
			if ms, err := strconv.Atoi(line[len("retry: "):]); err == nil && ms >= 0 {
				hintedRetry = time.Duration(ms) * time.Millisecond
			}
		case strings.HasPrefix(line, ": reconnect"):
			hinted = true
		case strings.HasPrefix(line, "id: "):
			id = line[4:]
		case strings.HasPrefix(line, "data: "):
			data = line[6:]
		case line == "" && data != "":
			var e map[string]any
			if err := json.Unmarshal([]byte(data), &e); err == nil {
				if id != "" {
					*last = id
				}
				if sp.event(e) {
					return true, nil
				}
			}
			id, data = "", ""
		}
	}
	if hinted {
		*retry = hintedRetry
		return false, errReconnect
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	return false, errEndedEarly
}

// Progress shows what the agent is doing on one line of a terminal (or a
// line each when w is not a terminal), and each line of its notes once.
type Progress struct {
	w     io.Writer
	tty   bool
	frame int
	shown bool
	// notes are the note lines shown, which PrintTurn does not repeat.
	notes map[string]bool
}

// NewProgress returns a Progress writing to w, a terminal if tty.
func NewProgress(w io.Writer, tty bool) *Progress { return &Progress{w: w, tty: tty} }

var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// event shows an event; it reports whether the event ends the turn.
func (s *Progress) event(e map[string]any) bool {
	str := func(k string) string { v, _ := e[k].(string); return v }
	switch str("type") {
	case chat.EventToolStart:
		s.show(fmt.Sprintf("%s %s", str("tool_name"), summarizeInput(e["input"])))
	case chat.EventToolResult:
		s.show(fmt.Sprintf("%s: %s", str("tool_name"), firstLine(str("summary"))))
	case chat.EventTextDelta:
		s.show("writing the answer")
	case chat.EventState:
		s.show(str("state"))
	case chat.EventNote:
		for _, line := range strings.Split(str("text"), "\n") {
			if line == "" || s.notes[line] {
				continue
			}
			if s.notes == nil {
				s.notes = map[string]bool{}
			}
			s.notes[line] = true
			s.clear()
			fmt.Fprintf(s.w, "note: %s\n", line)
		}
	case chat.EventDone, chat.EventError:
		s.clear()
		return true
	}
	return false
}

func (s *Progress) show(text string) {
	text = firstLine(text)
	if len(text) > 100 {
		text = text[:100] + "…"
	}
	if !s.tty {
		fmt.Fprintf(s.w, "· %s\n", text)
		return
	}
	s.frame = (s.frame + 1) % len(spinFrames)
	fmt.Fprintf(s.w, "\r\033[K%s %s", spinFrames[s.frame], text)
	s.shown = true
}

func (s *Progress) clear() {
	if s.tty && s.shown {
		fmt.Fprint(s.w, "\r\033[K")
		s.shown = false
	}
}

func summarizeInput(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	for _, k := range []string{"path", "file_path", "pattern", "query", "command"} {
		if s, ok := m[k].(string); ok {
			return s
		}
	}
	return ""
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// PrintTurn prints a settled turn for a reader, styled for a terminal if
// tty: the answer as readable markdown and its citations, or why it
// failed, and the lines of its note that shown (if any) did not show.
func PrintTurn(w io.Writer, t chat.Turn, tty bool, shown *Progress) {
	if t.Answer != nil {
		fmt.Fprintln(w, renderMarkdown(t.Answer.AnswerMarkdown, tty))
		if len(t.Answer.Citations) > 0 {
			fmt.Fprintln(w)
			fmt.Fprintln(w, style("Citations", bold, tty))
			for _, c := range t.Answer.Citations {
				fmt.Fprintf(w, "  %s:%d-%d\n", c.Path, c.StartLine, c.EndLine)
			}
		}
		if t.Answer.SuggestsFix != nil {
			fmt.Fprintf(w, "\n%s %s\n", style("Suggested fix:", bold, tty), t.Answer.SuggestsFix.Summary)
		}
	}
	var note []string
	for _, line := range strings.Split(t.Note, "\n") {
		if line != "" && (shown == nil || !shown.notes[line]) {
			note = append(note, line)
		}
	}
	if len(note) > 0 {
		fmt.Fprintf(w, "\n%s\n", style(strings.Join(note, "\n"), dim, tty))
	}
	if t.State != chat.StateSucceeded {
		fmt.Fprintf(w, "The turn %s (%s).\n", t.State, t.Reason)
	}
	if t.Usage.CostUSD != nil {
		fmt.Fprintln(w, style(fmt.Sprintf("%d in / %d out tokens, %d calls, $%s", t.Usage.InputTokens, t.Usage.OutputTokens, t.Usage.Calls, strconv.FormatFloat(*t.Usage.CostUSD, 'f', 4, 64)), dim, tty))
	}
}

const (
	bold = "\033[1m"
	dim  = "\033[2m"
	cyan = "\033[36m"
)

func style(s, code string, tty bool) string {
	if !tty {
		return s
	}
	return code + s + "\033[0m"
}

// renderMarkdown makes markdown easier to read in a terminal: headings in
// bold, bullets as •, code blocks indented, inline code and bold marked.
func renderMarkdown(md string, tty bool) string {
	var b strings.Builder
	inCode := false
	for _, line := range strings.Split(strings.TrimRight(md, "\n"), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			inCode = !inCode
			continue
		case inCode:
			b.WriteString("    " + style(line, cyan, tty) + "\n")
			continue
		case strings.HasPrefix(trimmed, "#"):
			b.WriteString(style(strings.TrimSpace(strings.TrimLeft(trimmed, "#")), bold, tty) + "\n")
			continue
		case strings.HasPrefix(trimmed, "- "), strings.HasPrefix(trimmed, "* "):
			indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
			line = indent + "• " + trimmed[2:]
		}
		b.WriteString(inline(line, tty) + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// inline renders **bold** and `code` spans.
func inline(s string, tty bool) string {
	var b strings.Builder
	for len(s) > 0 {
		switch {
		case strings.HasPrefix(s, "**"):
			if j := strings.Index(s[2:], "**"); j >= 0 {
				b.WriteString(style(s[2:2+j], bold, tty))
				s = s[4+j:]
				continue
			}
		case s[0] == '`':
			if j := strings.IndexByte(s[1:], '`'); j >= 0 {
				b.WriteString(style(s[1:1+j], cyan, tty))
				s = s[2+j:]
				continue
			}
		}
		b.WriteByte(s[0])
		s = s[1:]
	}
	return b.String()
}
