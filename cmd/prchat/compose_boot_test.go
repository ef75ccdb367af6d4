package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/fakeapi/chatcompletions"
	"github.com/prchat/prchat/api/apitest"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/cmd/internal/freeaddr"
	"github.com/prchat/prchat/store/storetest"
	"github.com/prchat/prchat/worker/workertest"
)

// TestDeployChild is no test of its own: it is a prchat process of
// TestComposeTopologyBoots, which starts this test binary as
// `prchat <command>` with a container's environment.
func TestDeployChild(t *testing.T) {
	if os.Getenv("PRCHAT_DEPLOY_CHILD") != "1" {
		t.Skip("a prchat process of TestComposeTopologyBoots")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, flag.Args(), os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// container is one container of the compose topology, run as a process.
type container struct {
	name    string
	service composeService
	env     map[string]string
	root    string // its own file system: what is not on a named volume
	port    string // the host port its PRCHAT_LISTEN port maps to
	logs    *bytes.Buffer
	cmd     *exec.Cmd
}

// topology maps the compose file onto this machine: each container gets a
// root of its own, each named volume a directory all its containers
// share, each listening port a free port; the postgres and redis services
// are the test's Postgres and Redis.
type topology struct {
	t       *testing.T
	compose composeFile
	dir     string
	dbURL   string
	redis   string
	extra   map[string]string
}

// container makes the settings of a container of service; run and start
// run it.
func (tp *topology) container(service, name string) *container {
	t := tp.t
	t.Helper()
	s, ok := tp.compose.Services[service]
	if !ok {
		t.Fatalf("no service %s", service)
	}
	c := &container{name: name, service: s, root: filepath.Join(tp.dir, "containers", name), logs: &bytes.Buffer{}}
	c.env = containerEnv(t, s)
	for k, v := range c.env {
		switch {
		case k == "PRCHAT_DATABASE_URL":
			if u, err := url.Parse(v); err != nil || u.Hostname() != "postgres" {
				t.Fatalf("%s: PRCHAT_DATABASE_URL %q is not the postgres service", name, v)
			}
			c.env[k] = tp.dbURL
		case k == "PRCHAT_REDIS_URL":
			if u, err := url.Parse(v); err != nil || u.Hostname() != "redis" {
				t.Fatalf("%s: PRCHAT_REDIS_URL %q is not the redis service", name, v)
			}
			c.env[k] = tp.redis
		case k == "PRCHAT_LISTEN":
			host, _, err := net.SplitHostPort(v)
			if err != nil {
				t.Fatalf("%s: PRCHAT_LISTEN %q: %v", name, v, err)
			}
			c.port = freePort(tp.t)
			c.env[k] = net.JoinHostPort(host, c.port)
		case strings.HasPrefix(v, "/"):
			c.env[k] = tp.hostPath(c, v)
		}
	}
	// The test's additions name places of this machine.
	for k, v := range tp.extra {
		c.env[k] = v
	}
	// What a container runtime sets: the container's host name, and the
	// image user's home (its data directory).
	c.env["HOSTNAME"] = name
	c.env["HOME"] = tp.hostPath(c, "/var/lib/prchat")
	if err := os.MkdirAll(c.env["HOME"], 0o700); err != nil {
		t.Fatal(err)
	}
	return c
}

// hostPath maps a path of container c to this machine.
func (tp *topology) hostPath(c *container, p string) string {
	for _, v := range c.service.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		dst, _, _ = strings.Cut(dst, ":")
		if _, named := tp.compose.Volumes[src]; named && (p == dst || strings.HasPrefix(p, dst+"/")) {
			return filepath.Join(tp.dir, "volumes", src, strings.TrimPrefix(p, dst))
		}
	}
	return filepath.Join(c.root, p)
}

// testAddrs are the addresses this package's tests handed out.
var testAddrs freeaddr.Book

// freePort returns a port of 127.0.0.1 free on this machine that no test
// of this package has been given (see freeaddr): two containers given the
// same would fight over it.
func freePort(t *testing.T) string {
	t.Helper()
	addr, err := testAddrs.Next()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// command returns the process of c running args (its service's command
// when nil).
func (c *container) command(args []string) *exec.Cmd {
	if args == nil {
		args = c.service.Command
	}
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestDeployChild$", "--"}, args...)...)
	cmd.Env = []string{"PRCHAT_DEPLOY_CHILD=1", "PATH=" + os.Getenv("PATH")}
	for k, v := range c.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// run runs args in c to the end and returns its standard output.
func (c *container) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := c.command(args)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: prchat %v: %v\n%s%s", c.name, args, err, &out, &errOut)
	}
	return out.String()
}

// start starts c's service command; it is stopped when the test ends.
func (c *container) start(t *testing.T) {
	t.Helper()
	c.cmd = c.command(nil)
	c.cmd.Stdout, c.cmd.Stderr = c.logs, c.logs
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(chattest.Patience()):
			_ = c.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("logs of %s:\n%s", c.name, c.logs)
		}
	})
}

// healthy waits until c's compose health check passes: its curl command
// run here, its port mapped.
func (c *container) healthy(t *testing.T) {
	t.Helper()
	test := c.service.Healthcheck.Test
	if len(test) < 2 || test[0] != "CMD" || test[1] != "curl" {
		t.Fatalf("%s: health check %q is not a curl command", c.name, test)
	}
	args := make([]string, len(test)-2)
	for i, a := range test[2:] {
		args[i] = strings.Replace(a, "127.0.0.1:8080", "127.0.0.1:"+c.port, 1)
	}
	var out []byte
	var err error
	defer func() {
		if t.Failed() {
			t.Logf("%s's last health check curl %v: %v %s\n%s", c.name, args, err, out, c.logs)
		}
	}()
	chattest.EventuallyWithin(t, time.Minute, c.name+" to pass its health check", func() bool {
		out, err = exec.Command("curl", args...).CombinedOutput()
		return err == nil
	})
}

func (c *container) url() string { return "http://127.0.0.1:" + c.port }

// TestComposeTopologyBoots boots deploy/compose.yaml as plain processes:
// migrate, the first admin token made as the README says, two API and two
// worker containers, each with exactly the environment the compose file
// and the image give it (env_file, environment, ENV), its paths and ports
// mapped to this machine and the postgres and redis services to the test's.
// The test adds only what a deployment adds to prchat.env: a model
// endpoint (a fake of the OpenAI API) and the folder of its repositories.
// A provider key stored through one API is used by both workers, each
// running a turn asked through one API and streamed through the other.
func TestComposeTopologyBoots(t *testing.T) {
	t.Parallel()
	if os.Getenv(storetest.EnvDatabaseURL) == "" || os.Getenv(workertest.EnvRedisURL) == "" {
		t.Skip("needs the test Postgres and Redis (PRCHAT_TEST_DATABASE_URL, PRCHAT_TEST_REDIS_URL)")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but curl, which the compose health checks run, is not installed")
		}
		t.Skip("the compose health checks run curl, which is not installed")
	}
	const stored = "sk-compose-Kq3Vx8Lm2Np5Rt7Wz9Yb"
	fake := chatcompletions.NewServer()
	defer fake.Close()
	fake.RequireKey(stored)
	fake.Handle(func(r chatcompletions.Request) chatcompletions.Reply {
		return chatcompletions.Reply{JSON: goodAnswer("Load refuses an empty path with errEmptyPath.")}
	})
	repoDir, head, base := gitRepo(t)
	tp := &topology{t: t, compose: readCompose(t), dir: t.TempDir(), dbURL: postgresURL(t), redis: workertest.RedisURL(t),
		extra: map[string]string{"PRCHAT_OPENAI_BASE_URL": fake.URL, "PRCHAT_REPOS_ROOTS": filepath.Dir(repoDir)}}

	migrate := tp.container("migrate", "prchat-migrate-1")
	migrate.run(t, "migrate")
	token := strings.TrimSpace(migrate.run(t, "token", "create", "--name", "admin", "--scope", "admin"))
	if !strings.HasPrefix(token, "prc_") {
		t.Fatalf("token create printed %q", token)
	}
	var apis, workers []*container
	for i := range 2 {
		apis = append(apis, tp.container("api", fmt.Sprintf("prchat-api-%d", i+1)))
		// Docker names a container's host after its id.
		workers = append(workers, tp.container("worker", randomHostname()))
	}
	for _, c := range append(append([]*container{}, apis...), workers...) {
		c.start(t)
	}
	for _, c := range append(append([]*container{}, apis...), workers...) {
		c.healthy(t)
	}

	call := func(c *container, method, path string, body any, want int, out any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			raw, _ := json.Marshal(body)
			rd = bytes.NewReader(raw)
		}
		req, _ := http.NewRequest(method, c.url()+path, rd)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s on %s: %v", method, path, c.name, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s on %s: %d %s, want %d", method, path, c.name, resp.StatusCode, raw, want)
		}
		if out != nil {
			if err := json.Unmarshal(raw, out); err != nil {
				t.Fatal(err)
			}
		}
	}
	call(apis[0], "POST", "/api/v1/repos", map[string]any{"name": "acme/widget", "clone_path": repoDir}, http.StatusCreated, nil)
	call(apis[0], "POST", "/api/v1/providers/openai/key", map[string]any{"key": stored}, http.StatusNoContent, nil)
	var providers struct {
		Providers []struct {
			ID        string `json:"id"`
			HasKey    bool   `json:"has_key"`
			KeySource string `json:"key_source"`
		} `json:"providers"`
	}
	call(apis[1], "GET", "/api/v1/providers", nil, http.StatusOK, &providers)
	if !strings.Contains(fmt.Sprintf("%+v", providers), "ID:openai HasKey:true KeySource:stored") {
		t.Fatalf("the other API does not see the stored key: %+v", providers)
	}

	v, err := validator()
	if err != nil {
		t.Fatal(err)
	}
	// A review pinned to each worker: its first turn runs there.
	for i, w := range workers {
		asker, streamer := apis[i%2], apis[(i+1)%2]
		var rv struct{ Version int }
		call(asker, "POST", fmt.Sprintf("/api/v1/repos/acme/widget/pulls/%d/reviews", i+1), map[string]any{
			"head_sha": head, "base_sha": base, "backend": "openai", "session_host": w.name, "markdown": "Load now refuses an empty path.",
		}, http.StatusCreated, &rv)
		var asked struct{ Conversation struct{ ID string } }
		call(asker, "POST", fmt.Sprintf("/api/v1/repos/acme/widget/pulls/%d/reviews/%d/conversations", i+1, rv.Version),
			map[string]any{"question": "Why does Load refuse an empty path?"}, http.StatusAccepted, &asked)
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/conversations/%s/turns/1/events", streamer.url(), asked.Conversation.ID), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		evs := apitest.OpenStream(t, v, req, "TurnEvent").All()
		if got := types(evs); len(got) == 0 || got[len(got)-1] != "done" {
			t.Fatalf("the turn asked through %s, streamed through %s, ended with %v, not done", asker.name, streamer.name, got)
		}
		var turn turnJSON
		call(streamer, "GET", fmt.Sprintf("/api/v1/conversations/%s/turns/1", asked.Conversation.ID), nil, http.StatusOK, &turn)
		if turn.State != "succeeded" || turn.Answer == nil || !strings.Contains(turn.Answer.AnswerMarkdown, "errEmptyPath") {
			t.Fatalf("turn = %+v", turn)
		}
		// The worker it was pinned to ran it, with the stored key (the fake
		// refuses any other).
		if n := succeededTurns(t, w); n != 1 {
			t.Errorf("%s ran %d succeeded turns, want 1", w.name, n)
		}
	}
	if reqs := fake.Requests(); len(reqs) < 2 {
		t.Fatalf("the model got %d requests", len(reqs))
	}

	// One key for the whole deployment: the file on the shared volume, and
	// none in any container.
	var keys []string
	_ = filepath.WalkDir(tp.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "secret.key" {
			keys = append(keys, strings.TrimPrefix(p, tp.dir))
		}
		return nil
	})
	if want := "/volumes/secret/secret.key"; len(keys) != 1 || keys[0] != want {
		t.Errorf("secret key files: %v; want one, %s", keys, want)
	}
}

// randomHostname is a host name as Docker gives a container: 12 hex digits.
func randomHostname() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// succeededTurns reads a worker's prchat_turns_total of succeeded turns.
func succeededTurns(t *testing.T, w *container) int {
	t.Helper()
	resp, err := http.Get(w.url() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	n := 0
	for _, m := range regexp.MustCompile(`(?m)^prchat_turns_total\{[^}]*state="succeeded"[^}]*\} (\d+)$`).FindAllSubmatch(raw, -1) {
		v, _ := strconv.Atoi(string(m[1]))
		n += v
	}
	return n
}
