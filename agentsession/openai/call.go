package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/chat"
)

// reply is what one model call returned.
type reply struct {
	content string
	calls   []ToolCall
	finish  string
	usage   *goopenai.Usage // nil when the endpoint reported none
}

// errStreamCut is a stream that ended before the model finished.
var errStreamCut = errors.New("the stream ended before the model finished its reply")

// call makes the turn's next model call, retrying it as the package
// documentation says, and accounts for its usage. last forbids tool calls.
func (t *turn) call(ctx context.Context, last bool) (*reply, error) {
	n := t.usage.Calls + 1
	timeouts := 0
	t.shown = ""
	for attempt := 1; ; attempt++ {
		t.attemptText = ""
		start := time.Now()
		req := t.request(last)
		r, f := t.attempt(ctx, req)
		if f == nil {
			t.account(ctx, req, r, n, attempt, time.Since(start))
			return r, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("openai backend: model call %d: %w", n, err)
		}
		t.log.WarnContext(ctx, "model call failed", slog.Int("call", n), slog.Int("attempt", attempt),
			slog.Int("status", f.status), slog.String("kind", f.kind.String()), slog.Duration("took", time.Since(start)))
		switch f.kind {
		case failSchema:
			// The endpoint does not take response_format json_schema: ask
			// by instructions, now and in later calls of this model.
			t.b.noSchema.Store(schemaKey(t.baseURL, t.model), struct{}{})
			t.schema = nil
			t.log.InfoContext(ctx, "the endpoint rejects response_format json_schema; asking for JSON by instructions")
			attempt--
			continue
		case failFatal:
			return nil, chat.Fail(chat.ReasonBackendError, fmt.Errorf("openai backend: model call %d: %s", n, f.msg))
		case failTimeout:
			timeouts++
		}
		if attempt >= t.b.cfg.MaxAttempts {
			reason := chat.ReasonBackendError
			if timeouts == attempt {
				reason = chat.ReasonTimeout
			}
			return nil, chat.Fail(reason, fmt.Errorf("openai backend: model call %d failed %d times; the last time: %s", n, attempt, f.msg))
		}
		wait, err := t.retryWait(ctx, attempt, f)
		if err != nil {
			return nil, chat.Fail(chat.ReasonBackendError, fmt.Errorf("openai backend: model call %d: %s: %w", n, f.msg, err))
		}
		t.retries++
		t.note(fmt.Sprintf("Model call %d failed (%s); retry %d of %d in %s.", n, f.short(), attempt, t.b.cfg.MaxAttempts-1, roundWait(wait)))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("openai backend: model call %d: waiting to retry: %w", n, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// account adds a successful call's usage to the turn's.
func (t *turn) account(ctx context.Context, req goopenai.ChatCompletionRequest, r *reply, n, attempt int, took time.Duration) {
	var in, out int64
	var cost *float64
	reason := ""
	if r.usage != nil {
		in, out = int64(r.usage.PromptTokens), int64(r.usage.CompletionTokens)
		cost, reason = t.b.cost(t.model, in, out)
	} else {
		in = estimateTokens(req.Messages)
		outBytes := len(r.content)
		for _, c := range r.calls {
			outBytes += len(c.Name) + len(c.Arguments)
		}
		out = int64(outBytes/4 + 1)
		reason = "the endpoint reported no token usage for model " + t.model + "; tokens are estimated"
	}
	t.usage.Add(chat.Usage{InputTokens: in, OutputTokens: out, Calls: 1, CostUSD: cost, CostReason: reason})
	t.log.DebugContext(ctx, "model call", slog.Int("call", n), slog.Int("attempt", attempt),
		slog.Int64("input_tokens", in), slog.Int64("output_tokens", out), slog.Bool("usage_reported", r.usage != nil),
		slog.Int("tool_calls", len(r.calls)), slog.String("finish", r.finish), slog.Duration("took", took))
}

// attempt makes one try of a model call under the call timeout.
func (t *turn) attempt(ctx context.Context, req goopenai.ChatCompletionRequest) (*reply, *failure) {
	cctx, cancel := context.WithTimeout(ctx, t.b.cfg.CallTimeout)
	defer cancel()
	rec := &recorder{client: t.b.cfg.HTTPClient}
	cfg := goopenai.DefaultConfig(t.key)
	cfg.BaseURL = t.baseURL
	cfg.HTTPClient = rec
	// Keep-alive comments of a slow endpoint are not a broken stream.
	cfg.EmptyMessagesLimit = 100_000
	client := goopenai.NewClientWithConfig(cfg)

	var (
		r   *reply
		err error
	)
	if t.b.cfg.DisableStreaming {
		r, err = t.complete(cctx, client, req)
	} else {
		r, err = t.stream(cctx, client, req)
	}
	if err == nil {
		return r, nil
	}
	return nil, t.classify(cctx, err, rec)
}

// stream makes a streamed call, emitting its text as it comes and putting
// the tool calls' fragments together.
func (t *turn) stream(ctx context.Context, client *goopenai.Client, req goopenai.ChatCompletionRequest) (*reply, error) {
	req.StreamOptions = &goopenai.StreamOptions{IncludeUsage: true}
	s, err := client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var (
		content strings.Builder
		shown   agentsession.AnswerText
		acc     toolCalls
		finish  string
		usage   *goopenai.Usage
	)
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if text := ch.Delta.Content + ch.Delta.Refusal; text != "" {
				content.WriteString(text)
				t.show(shown.Write(text))
			}
			for i, tc := range ch.Delta.ToolCalls {
				acc.add(i, tc)
			}
			if ch.FinishReason != "" && ch.FinishReason != goopenai.FinishReasonNull {
				finish = string(ch.FinishReason)
			}
		}
	}
	if finish == "" {
		return nil, errStreamCut
	}
	t.show(shown.Flush())
	return &reply{content: content.String(), calls: acc.list(t.usage.Calls + 1), finish: finish, usage: usage}, nil
}

// complete makes a call without streaming.
func (t *turn) complete(ctx context.Context, client *goopenai.Client, req goopenai.ChatCompletionRequest) (*reply, error) {
	resp, err := client.CreateChatCompletion(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(resp.Choices) == 0 {
		return nil, errStreamCut
	}
	ch := resp.Choices[0]
	text := ch.Message.Content + ch.Message.Refusal
	var shown agentsession.AnswerText
	t.show(shown.Write(text) + shown.Flush())
	var acc toolCalls
	for i, tc := range ch.Message.ToolCalls {
		acc.add(i, tc)
	}
	r := &reply{content: text, calls: acc.list(t.usage.Calls + 1), finish: string(ch.FinishReason)}
	if resp.Usage.PromptTokens > 0 || resp.Usage.CompletionTokens > 0 {
		r.usage = &resp.Usage
	}
	return r, nil
}

// toolCalls puts the tool calls of a reply together from their fragments,
// by index: the first fragment of a call brings its id and name, the
// following ones pieces of its arguments.
type toolCalls struct {
	order []int
	calls map[int]*ToolCall
}

// add adds a fragment; pos is its place in its chunk, for endpoints that
// send no index.
func (a *toolCalls) add(pos int, tc goopenai.ToolCall) {
	idx := pos
	if tc.Index != nil {
		idx = *tc.Index
	}
	if a.calls == nil {
		a.calls = map[int]*ToolCall{}
	}
	c, ok := a.calls[idx]
	if !ok {
		c = &ToolCall{}
		a.calls[idx] = c
		a.order = append(a.order, idx)
	}
	if tc.ID != "" && c.ID == "" {
		c.ID = tc.ID
	}
	// A name comes whole in one fragment; some endpoints repeat it, a few
	// split it.
	if name := tc.Function.Name; name != "" && name != c.Name {
		c.Name += name
	}
	c.Arguments += tc.Function.Arguments
}

// list returns the calls in order of index, giving those that came without
// an id one (call is the model call's number).
func (a *toolCalls) list(call int) []ToolCall {
	slices.Sort(a.order)
	out := make([]ToolCall, 0, len(a.order))
	for _, idx := range a.order {
		c := *a.calls[idx]
		if c.ID == "" {
			c.ID = fmt.Sprintf("%s%d_%d", toolIDPrefix, call, idx)
		}
		out = append(out, c)
	}
	return out
}

// recorder sends a call's request and keeps the response's status and
// headers (go-openai's errors carry neither Retry-After nor, for errors
// inside a stream, the status).
type recorder struct {
	client *http.Client
	status int
	header http.Header
}

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	resp, err := r.client.Do(req)
	if resp != nil {
		r.status, r.header = resp.StatusCode, resp.Header
	}
	return resp, err
}

// failKind says what to do about a failed attempt.
type failKind int

const (
	failRetry   failKind = iota // try again after a wait
	failTimeout                 // the attempt timed out: try again
	failFatal                   // give up: trying again will not help
	failSchema                  // the endpoint rejects response_format json_schema
)

func (k failKind) String() string {
	return [...]string{"retry", "timeout", "fatal", "schema_rejected"}[k]
}

// failure is a failed attempt.
type failure struct {
	kind   failKind
	status int    // HTTP status, 0 if none
	msg    string // what happened, for notes and errors (never the key)
	// retryAfter is how long the endpoint asked to wait, if it did.
	retryAfter    time.Duration
	hasRetryAfter bool
}

// short returns the failure in a few words, for notes.
func (f *failure) short() string {
	switch {
	case f.kind == failTimeout:
		return "timed out"
	case f.status == http.StatusTooManyRequests:
		return "HTTP 429, rate limited"
	case f.status != 0:
		return fmt.Sprintf("HTTP %d", f.status)
	}
	return clip(f.msg, 120)
}

// classify says what a failed attempt means. cctx is the attempt's
// context.
func (t *turn) classify(cctx context.Context, err error, rec *recorder) *failure {
	if errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return &failure{kind: failTimeout, msg: fmt.Sprintf("no complete reply within %s", t.b.cfg.CallTimeout)}
	}
	status := 0
	if rec.status >= 400 {
		status = rec.status
	}
	var (
		apiErr *goopenai.APIError
		reqErr *goopenai.RequestError
		detail string
		code   string
	)
	switch {
	case errors.As(err, &apiErr):
		detail = apiErr.Message
		if c, ok := apiErr.Code.(string); ok {
			code = c
		}
		if status == 0 && apiErr.HTTPStatusCode >= 400 {
			status = apiErr.HTTPStatusCode
		}
	case errors.As(err, &reqErr):
		detail = strings.TrimSpace(string(reqErr.Body))
		if status == 0 {
			status = reqErr.HTTPStatusCode
		}
	}
	detail = clip(strings.TrimSpace(detail), 300)
	f := &failure{status: status}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// The endpoint's message may quote part of the key: leave it out.
		f.kind = failFatal
		f.msg = fmt.Sprintf("the endpoint refused the request with HTTP %d %s: check the API key of the openai provider and that it may use model %s",
			status, http.StatusText(status), t.model)
	case status == http.StatusTooManyRequests && (code == "insufficient_quota" || strings.Contains(detail, "exceeded your current quota")):
		f.kind = failFatal
		f.msg = "HTTP 429: the account behind the API key has no quota left"
	case status == http.StatusTooManyRequests, status == http.StatusRequestTimeout, status >= 500:
		f.kind = failRetry
		f.msg = strings.TrimSuffix(fmt.Sprintf("HTTP %d %s: %s", status, http.StatusText(status), detail), ": ")
		f.retryAfter, f.hasRetryAfter = retryAfter(rec.header, time.Now())
	case status == http.StatusBadRequest && t.schema != nil && mentionsResponseFormat(detail):
		f.kind = failSchema
		f.msg = "HTTP 400: the endpoint rejects response_format json_schema"
	case status == http.StatusNotFound:
		f.kind = failFatal
		f.msg = fmt.Sprintf("HTTP 404: the endpoint has no model %s or no chat completions API: %s", t.model, detail)
	case status >= 400:
		f.kind = failFatal
		f.msg = strings.TrimSuffix(fmt.Sprintf("HTTP %d %s: %s", status, http.StatusText(status), detail), ": ")
	case apiErr != nil:
		// An error event inside a stream.
		f.kind = failRetry
		f.msg = "the endpoint reported an error in the stream: " + detail
	case errors.Is(err, errStreamCut):
		f.kind = failRetry
		f.msg = errStreamCut.Error()
	case transient(err):
		f.kind = failRetry
		f.msg = "the connection to the endpoint failed: " + clip(transportError(err), 200)
	default:
		f.kind = failFatal
		f.msg = clip(transportError(err), 300)
	}
	return f
}

// mentionsResponseFormat reports whether an error message is about the
// response_format parameter.
func mentionsResponseFormat(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "response_format") || strings.Contains(m, "json_schema") ||
		strings.Contains(m, "response format") || strings.Contains(m, "structured output")
}

// transient reports whether err is a failure of the connection that a
// retry may not meet again.
func transient(err error) bool {
	var (
		ue *url.Error
		ne net.Error
	)
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// transportError renders err without the request's URL, which may carry
// credentials.
func transportError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

// retryAfter reads how long a response asks the client to wait: the
// retry-after-ms header (OpenAI's), else Retry-After in seconds or as an
// HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 && secs < 1e7 {
		return time.Duration(secs * float64(time.Second)), true
	}
	if when, err := http.ParseTime(v); err == nil {
		return max(when.Sub(now), 0), true
	}
	return 0, false
}

// retryWait returns how long to wait before retry number attempt: what the
// endpoint asked for, else the backoff. A wait longer than MaxRetryAfter,
// or one that ends past ctx's deadline, is an error: the turn fails now
// instead of sleeping in vain.
func (t *turn) retryWait(ctx context.Context, attempt int, f *failure) (time.Duration, error) {
	if !f.hasRetryAfter {
		return chat.Backoff{First: t.b.cfg.BackoffBase, Max: t.b.cfg.BackoffMax, Jitter: true}.Delay(attempt), nil
	}
	wait := f.retryAfter
	if wait > t.b.cfg.MaxRetryAfter {
		return 0, fmt.Errorf("the endpoint asks to wait %s before retrying, more than the %s allowed", roundWait(wait), t.b.cfg.MaxRetryAfter)
	}
	if deadline, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(deadline) {
		return 0, fmt.Errorf("the endpoint asks to wait %s before retrying, past the turn's deadline", roundWait(wait))
	}
	return wait, nil
}

// roundWait rounds a wait for people.
func roundWait(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
