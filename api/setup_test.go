package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/claude"
	"github.com/prchat/prchat/agentsession/codex"
	"github.com/prchat/prchat/agentsession/local"
	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/api"
	"github.com/prchat/prchat/api/apitest"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/chat/mask"
	"github.com/prchat/prchat/store"
	"github.com/prchat/prchat/store/storetest"
	"github.com/prchat/prchat/worker"
	"github.com/prchat/prchat/worker/workertest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// ownSecret is the daemon's own configured secret in every fixture: it
// must never reach a client.
const ownSecret = "prchat-own-0penai-key-Vq7Lr2Xz9"

// fixture is an API server on chat's real roles: a store from storetest
// (Postgres when the environment names one, else SQLite), a Redis from
// workertest holding the queue and the live events, real run directories
// and a scripted agent. No worker consumes the queue: a test runs a turn
// with run, as a worker would.
type fixture struct {
	t        *testing.T
	svc      *chattest.Domain
	store    *store.Store
	rdb      redis.UniversalClient
	scripted *scripted.Backend
	repo     agentsessiontest.Repo
	dataDir  string
	access   *chat.Access
	srv      *api.Server
	url      string
	c        *client

	runCtx context.Context
	runs   sync.WaitGroup
}

// options change a fixture.
type options struct {
	api  api.Config
	chat chattest.Config
	// envKeys are the providers' keys from the environment, by provider.
	envKeys map[string]string
	// access checks API tokens (fixture.access), kept in the store.
	access bool
	// now is the service's clock (default the real one).
	now chat.Clock
}

const repoName = "acme/widget"

// setup starts an API server for the test and registers repoName, a git
// repository with two commits.
func setup(t *testing.T, change ...func(*options)) *fixture {
	t.Helper()
	o := options{api: api.Config{PingInterval: time.Minute, EndSpread: -1 /* streams end at their final event; one test spreads them */}, chat: chattest.Config{WorkerID: "api-test", MaxRepairs: 2, AnyPath: true}}
	for _, f := range change {
		f(&o)
	}
	f := &fixture{t: t, store: storetest.New(t), scripted: scripted.New(""), dataDir: t.TempDir()}
	rdb, err := worker.NewRedisClient(workertest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	f.rdb = rdb
	events := worker.NewEvents(rdb, worker.EventsConfig{})
	t.Cleanup(events.Stop)
	queue, err := worker.NewQueue(rdb, worker.QueueConfig{Feeds: events})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := agentsession.NewWorkspaces(agentsession.Config{DataDir: f.dataDir})
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := chat.NewSealer([]byte("a test secret of 32 bytes or so."))
	if err != nil {
		t.Fatal(err)
	}
	o.chat.Providers = testProviders(o.envKeys)
	o.chat.DefaultProvider = "openai"
	if f.svc, err = chattest.New(o.chat, chattest.Deps{
		Store: f.store, Queue: queue, Hosts: worker.NewHosts(rdb, worker.HostsConfig{}), Workspaces: ws, Clones: ws, Limiter: worker.NewRateLimiter(rdb),
		Backends: []chat.Backend{f.scripted, local.New(local.Config{})},
		Masker:   mask.New(ownSecret), Settings: f.store, Sealer: sealer, Histories: f.store,
		Publisher: events, Follower: events, Logger: testLogger(t), Now: o.now,
		Reports: f.store, Files: ws,
		SessionFiles: f.store,
		SessionCheckers: map[string]chat.SessionChecker{
			chat.BackendClaudeCode: claude.CheckSessionFile,
			chat.BackendCodex:      codex.CheckSessionFile,
		},
	}); err != nil {
		t.Fatal(err)
	}
	o.api.Registry = prometheus.NewRegistry()
	if o.api.Logger == nil {
		o.api.Logger = testLogger(t)
	}
	if o.access {
		if f.access, err = chat.NewAccess(chat.AccessConfig{}, f.store); err != nil {
			t.Fatal(err)
		}
		o.api.Access = f.access
	}
	srv, err := api.New(o.api, apiDomain(f.svc))
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	f.url = serve(t, srv)
	f.c = newClient(t, f.url)

	ctx, cancel := context.WithCancel(context.Background())
	f.runCtx = ctx
	t.Cleanup(func() { cancel(); f.runs.Wait() })

	f.repo = agentsessiontest.NewRepo(t,
		map[string]string{"main.go": "package main\n\nfunc main() {\n\tloadSettings(\"app.toml\")\n}\n", "settings/settings.go": "package settings\n\n// Load reads the file.\nfunc Load(path string) error {\n\treturn nil\n}\n"},
		map[string]string{"settings/settings.go": "package settings\n\nimport \"errors\"\n\nvar errEmptyPath = errors.New(\"empty path\")\n\n// Load reads the settings file at path.\nfunc Load(path string) error {\n\tif path == \"\" {\n\t\treturn errEmptyPath\n\t}\n\treturn nil\n}\n"},
	)
	f.do("POST", "/api/v1/repos", map[string]any{"name": repoName, "clone_path": f.repo.Dir}, http.StatusCreated, nil)
	return f
}

// apiDomain is the API's view of the roles of d.
func apiDomain(d *chattest.Domain) api.Domain {
	ad := api.Domain{Ready: d.Readiness, Repositories: d.Admin, Turns: d.Turns, Subscriptions: d.Subscriptions,
		Providers: d.Providers, Reports: d.Reports}
	if d.Webhooks != nil {
		ad.Webhooks = d.Webhooks
	}
	return ad
}

// serve serves srv on a loopback port until the test ends and returns its
// base URL.
func serve(t *testing.T, srv *api.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), chattest.Patience())
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := chattest.Receive(t, "Serve to return after Shutdown", done); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func testProviders(envKeys map[string]string) []chat.ProviderConfig {
	return []chat.ProviderConfig{
		{ID: "openai", Name: "OpenAI", Backend: chat.BackendOpenAI, BaseURL: "https://api.openai.example/v1", KeyEnv: "PRCHAT_OPENAI_API_KEY", EnvKey: envKeys["openai"], Keys: true, DefaultModel: "gpt-test"},
		{ID: "ollama", Name: "Ollama", Backend: chat.BackendOpenAI, BaseURL: "http://127.0.0.1:11434/v1", KeyEnv: "PRCHAT_OLLAMA_API_KEY", EnvKey: envKeys["ollama"], Keys: true, DefaultModel: "llama-test"},
		{ID: "litellm", Name: "LiteLLM", Backend: chat.BackendOpenAI, BaseURL: "http://127.0.0.1:4000/v1", KeyEnv: "PRCHAT_LITELLM_API_KEY", EnvKey: envKeys["litellm"], Keys: true},
		{ID: chat.BackendCodex, Name: "Codex CLI", Backend: chat.BackendCodex},
		{ID: chat.BackendLocal, Name: "Local search (no model)", Backend: chat.BackendLocal},
	}
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("PRCHAT_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With(slog.String("test", t.Name()))
}

// do sends a request to the fixture's server, checks its status (and the
// response against openapi.json) and decodes the body into out.
func (f *fixture) do(method, path string, body any, want int, out any) []byte {
	f.t.Helper()
	return f.c.expect(f.t, method, path, body, want, out)
}

// review records a review of PR 7 with backend and returns its version.
func (f *fixture) review(backend string, extra map[string]any) int {
	f.t.Helper()
	body := map[string]any{"head_sha": f.repo.Head(), "base_sha": f.repo.Commits[0], "backend": backend, "markdown": "Load now refuses an empty path."}
	for k, v := range extra {
		body[k] = v
	}
	var r struct{ Version int }
	f.do("POST", "/api/v1/repos/"+repoName+"/pulls/7/reviews", body, http.StatusCreated, &r)
	return r.Version
}

// turnJSON is a turn as a client reads it.
type turnJSON struct {
	ConversationID string       `json:"conversation_id"`
	Number         int          `json:"number"`
	State          string       `json:"state"`
	Answer         *chat.Answer `json:"answer"`
	Note           string       `json:"note"`
	Reason         string       `json:"reason"`
	Session        string       `json:"session"`
	Usage          chat.Usage   `json:"usage"`
}

// ask starts a conversation about version v and returns its id.
func (f *fixture) ask(v int, question string) string {
	f.t.Helper()
	var out struct {
		Conversation struct{ ID string }
		Turn         turnJSON
	}
	f.do("POST", fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews/%d/conversations", repoName, v), map[string]any{"question": question}, http.StatusAccepted, &out)
	if out.Turn.State != "queued" || out.Turn.Number != 1 {
		f.t.Fatalf("new turn = %+v", out.Turn)
	}
	return out.Conversation.ID
}

// next asks the next question of conv and returns the turn's number.
func (f *fixture) next(conv, question string) int {
	f.t.Helper()
	var out struct{ Turn turnJSON }
	f.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": question}, http.StatusAccepted, &out)
	return out.Turn.Number
}

// run runs turn n of conv in the background, as a worker would, until it
// settles or the test ends; the returned channel closes when it is done.
func (f *fixture) run(conv string, n int) <-chan struct{} {
	f.t.Helper()
	t, err := f.store.Turn(context.Background(), conv, n)
	if err != nil {
		f.t.Fatal(err)
	}
	done := make(chan struct{})
	f.runs.Add(1)
	go func() {
		defer f.runs.Done()
		defer close(done)
		if err := f.svc.Runner.Run(f.runCtx, t.ID, "api-test/1"); err != nil && f.runCtx.Err() == nil {
			f.t.Errorf("run turn %d: %v", n, err)
		}
	}()
	return done
}

// settle runs turn n of conv and waits for it to settle.
func (f *fixture) settle(conv string, n int) turnJSON {
	f.t.Helper()
	chattest.Receive(f.t, fmt.Sprintf("turn %d's run to end", n), f.run(conv, n))
	var t turnJSON
	f.do("GET", fmt.Sprintf("/api/v1/conversations/%s/turns/%d", conv, n), nil, http.StatusOK, &t)
	if !chat.State(t.State).Final() {
		f.t.Fatalf("turn %d after its run = %+v", n, t)
	}
	return t
}

// waitCalls waits until the scripted agent has received n calls.
func (f *fixture) waitCalls(n int) {
	f.t.Helper()
	chattest.Eventually(f.t, fmt.Sprintf("the agent to receive %d calls", n), func() bool { return len(f.scripted.Requests()) >= n })
}

// goodAnswer is a valid answer about the test repository.
func goodAnswer(text string) *chat.Answer {
	return &chat.Answer{AnswerMarkdown: text, Citations: []chat.Citation{{Path: "settings/settings.go", StartLine: 8, EndLine: 12}}}
}

// client is an HTTP client of the API that checks every response against
// openapi.json (apitest.Validator).
type client struct {
	base string
	v    *apitest.Validator
}

// validator is the one apitest.Validator the package's clients share (it
// is safe for concurrent use; loading the document is most of a setup's
// CPU).
var validator = sync.OnceValues(apitest.NewValidator)

func newClient(t *testing.T, base string) *client {
	t.Helper()
	v, err := validator()
	if err != nil {
		t.Fatal(err)
	}
	return &client{base: base, v: v}
}

// response is what the server answered.
type response struct {
	status int
	header http.Header
	body   []byte
}

// send sends a request; body is JSON-encoded unless it is a string or
// []byte. Headers may be given as name, value pairs ("Host" sets the
// request's Host, an empty value removes a header).
func (c *client) send(t *testing.T, method, path string, body any, headers ...string) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	case io.Reader:
		rd = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		switch name, value := headers[i], headers[i+1]; {
		case name == "Host":
			req.Host = value
		case value == "":
			req.Header.Del(name)
		default:
			req.Header.Set(name, value)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	c.check(t, req, resp, raw)
	return response{status: resp.StatusCode, header: resp.Header, body: raw}
}

// expect sends a request, checks its status and decodes the body into out.
func (c *client) expect(t *testing.T, method, path string, body any, want int, out any) []byte {
	t.Helper()
	r := c.send(t, method, path, body)
	if r.status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, r.body, err)
		}
	}
	return r.body
}

// check validates a response against the document; raw is its body, nil
// for a stream (whose events are checked one by one).
func (c *client) check(t *testing.T, req *http.Request, resp *http.Response, raw []byte) {
	t.Helper()
	if err := c.v.Check(req, resp.StatusCode, resp.Header, raw); err != nil {
		t.Error(err)
	}
}

var (
	timeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

// golden compares a response with testdata/<name>.json, after replacing
// what differs from run to run (times, ids, commits, paths) by
// placeholders; with -update it rewrites the file.
func (f *fixture) golden(t *testing.T, name string, r response) {
	t.Helper()
	var body any
	if len(r.body) > 0 {
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatalf("golden %s: %v: %s", name, err, r.body)
		}
	}
	replacer := strings.NewReplacer(f.repo.Head(), "<head>", f.repo.Commits[0], "<base>", f.repo.Dir, "<clone_path>", f.dataDir, "<data_dir>")
	got := map[string]any{"status": r.status, "body": normalise(body, "", replacer)}
	if allow := r.header.Get("Allow"); allow != "" {
		got["allow"] = allow
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(got); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	path := filepath.Join("testdata", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (run go test ./api -update to write it)", name, err)
	}
	if diff := cmp.Diff(string(want), string(raw)); diff != "" {
		t.Errorf("%s differs from %s (-want +got):\n%s", name, path, diff)
	}
}

// normalise replaces the values of v that change from run to run.
func normalise(v any, key string, r *strings.Replacer) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalise(e, k, r)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = normalise(e, key, r)
		}
		return v
	case string:
		switch {
		case key == "trace_id" && v != "":
			return "<trace_id>"
		case timeRE.MatchString(v):
			return "<time>"
		}
		return uuidRE.ReplaceAllString(r.Replace(v), "<uuid>")
	}
	return v
}

// sseEvent and sseStream are apitest's: the stream reader both the api and
// the daemon tests use.
type (
	sseEvent  = apitest.Event
	sseStream = apitest.Stream
)

func types(evs []sseEvent) []string { return apitest.Types(evs) }
func seqs(evs []sseEvent) []int64   { return apitest.Seqs(evs) }

// subscribe opens a turn's event stream, from lastID if not "".
func (f *fixture) subscribe(conv string, n int, lastID string) *sseStream {
	f.t.Helper()
	var h []string
	if lastID != "" {
		h = []string{"Last-Event-ID", lastID}
	}
	return f.c.stream(f.t, fmt.Sprintf("/api/v1/conversations/%s/turns/%d/events", conv, n), "TurnEvent", h...)
}

// stream opens an SSE stream whose events' data follow schema.
func (c *client) stream(t *testing.T, path, schema string, headers ...string) *sseStream {
	t.Helper()
	req, err := http.NewRequest("GET", c.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return apitest.OpenStream(t, c.v, req, schema)
}
