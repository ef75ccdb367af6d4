//go:build chaos

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
)

// clusterConfig shapes a cluster.
type clusterConfig struct {
	apis        int           // API processes; default 1
	concurrency int           // turns a worker runs at once; default 4
	grace       time.Duration // PRCHAT_SHUTDOWN_GRACE of the workers; 0: their default
	sentinel    bool          // Redis is a master, a replica and three sentinels
	// workerEnv, if set, adds to a worker's environment, given the
	// process's name and its data directory (also its HOME): the settings
	// of its agent CLIs.
	workerEnv func(t *testing.T, name, dataDir string) map[string]string
}

// cluster is one prchat deployment under test: a database of its own on
// the suite's Postgres, a redis-server of its own, API and worker
// processes (two workers, w1 and w2).
type cluster struct {
	t     *testing.T
	name  string
	cfg   clusterConfig
	dir   string
	dbURL string
	redis *redisServer // the Redis master (at the start, with sentinel)
	// sentinel is the Sentinel deployment of a cluster with clusterConfig.sentinel.
	sentinel *sentinels
	redisURL string // PRCHAT_REDIS_URL of its processes
	repo     agentsessiontest.Repo

	apis    []*proc
	workers []*proc
	http    *client
	version int // the recorded review's version
}

// proc is one prchat process.
type proc struct {
	name   string
	role   string // api or worker
	id     string // PRCHAT_WORKER_ID
	key    string // its PRCHAT_OPENAI_API_KEY: how the model tells workers apart
	listen string
	env    []string
	logs   string // its log file

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	exitedAt time.Time
	started  time.Time
}

// newCluster starts a cluster: migrate, the APIs, the repository and its
// review, then the workers.
func newCluster(t *testing.T, name string, cfg clusterConfig) *cluster {
	t.Helper()
	cfg.apis = max(cfg.apis, 1)
	if cfg.concurrency == 0 {
		cfg.concurrency = 4
	}
	c := &cluster{t: t, name: name, cfg: cfg, dir: t.TempDir()}
	ctx := context.Background()
	var err error
	if c.dbURL, err = lab.pg.createDatabase(ctx, "chaos_"+name); err != nil {
		t.Fatal(err)
	}
	if cfg.sentinel {
		if c.sentinel, err = startSentinels(c.dir); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.sentinel.close)
		c.redis, c.redisURL = c.sentinel.master, c.sentinel.url()
	} else {
		if c.redis, err = startRedis(c.dir); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.redis.close)
		c.redisURL = c.redis.url()
	}
	c.http = newClient(c.forbidden())
	c.repo = agentsessiontest.NewRepo(t,
		map[string]string{"settings/settings.go": "package settings\n\n// Load reads the file.\nfunc Load(path string) error {\n\treturn nil\n}\n"},
		map[string]string{"settings/settings.go": "package settings\n\nimport \"errors\"\n\nvar errEmptyPath = errors.New(\"empty path\")\n\n// Load reads the settings file at path.\nfunc Load(path string) error {\n\tif path == \"\" {\n\t\treturn errEmptyPath\n\t}\n\treturn nil\n}\n"},
	)

	migrate := c.newProc("migrate", "migrate", "")
	cmd := exec.Command(lab.bin, "migrate")
	cmd.Env = migrate.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("prchat migrate: %v\n%s", err, out)
	}
	for i := range cfg.apis {
		p := c.newProc(fmt.Sprintf("api%d", i+1), "api", "")
		c.apis = append(c.apis, p)
		c.start(p)
	}
	if _, err := c.http.do("POST", c.apiURL()+"/api/v1/repos", map[string]any{"name": "acme/chaos", "clone_path": c.repo.Dir}, http.StatusCreated, nil); err != nil {
		t.Fatal(err)
	}
	var rv struct{ Version int }
	if _, err := c.http.do("POST", c.apiURL()+"/api/v1/repos/acme/chaos/pulls/7/reviews", map[string]any{
		"head_sha": c.repo.Head(), "base_sha": c.repo.Commits[0], "backend": "openai",
		"markdown": "Load now refuses an empty path.",
	}, http.StatusCreated, &rv); err != nil {
		t.Fatal(err)
	}
	c.version = rv.Version
	for i := range 2 {
		p := c.newProc(fmt.Sprintf("w%d", i+1), "worker", name+"-w"+fmt.Sprint(i+1))
		c.workers = append(c.workers, p)
		c.start(p)
	}
	t.Cleanup(c.stopAll)
	return c
}

// newProc prepares a process's settings; start runs it.
func (c *cluster) newProc(name, role, id string) *proc {
	p := &proc{name: name, role: role, id: id, key: "sk-chaos-" + name + "-" + randomHex(12)}
	addr, err := freeAddr()
	if err != nil {
		c.t.Fatal(err)
	}
	p.listen = addr
	p.logs = filepath.Join(c.dir, name+".log")
	dataDir := filepath.Join(c.dir, "data-"+name)
	env := map[string]string{
		"PRCHAT_LISTEN":          addr,
		"PRCHAT_DATA_DIR":        dataDir,
		"PRCHAT_DATABASE_URL":    c.dbURL,
		"PRCHAT_REDIS_URL":       c.redisURL,
		"PRCHAT_OPENAI_BASE_URL": lab.model.URL,
		"PRCHAT_OPENAI_API_KEY":  p.key,
		"PRCHAT_OPENAI_MODEL":    "chaos-model",
		"PRCHAT_SECRET_KEY":      "chaos-secret-key-" + c.name + "-0123456789",
		"PRCHAT_CONCURRENCY":     fmt.Sprint(c.cfg.concurrency),
		"PRCHAT_LOG_FORMAT":      "text",
		"PRCHAT_LOG_LEVEL":       "info",
		// Ten idle workers polling every 5 ms would take a core of the
		// machine; a turn waiting 25 ms more changes nothing here.
		"PRCHAT_POLL_INTERVAL": "25ms",
	}
	if id != "" {
		env["PRCHAT_WORKER_ID"] = id
	}
	if c.cfg.grace > 0 {
		env["PRCHAT_SHUTDOWN_GRACE"] = c.cfg.grace.String()
	}
	if role == "worker" && c.cfg.workerEnv != nil {
		for k, v := range c.cfg.workerEnv(c.t, name, dataDir) {
			env[k] = v
		}
	}
	p.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dataDir, "TZ=UTC"}
	for k, v := range env {
		p.env = append(p.env, k+"="+v)
	}
	return p
}

// start runs p and waits until it serves /healthz (an API: /readyz).
func (c *cluster) start(p *proc) {
	c.t.Helper()
	logf, err := os.OpenFile(p.logs, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	fmt.Fprintf(logf, "=== start %s at %s\n", p.name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(lab.bin, p.role)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		c.t.Fatalf("start prchat %s: %v", p.role, err)
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited, p.started = cmd, exited, time.Now()
	p.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.exitedAt = time.Now()
		p.mu.Unlock()
		close(exited)
	}()
	path := "/healthz"
	if p.role == "api" {
		path = "/readyz"
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + p.listen + path)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			c.t.Fatalf("prchat %s (%s) exited at start:\n%s", p.role, p.name, tail(p.logs, 30))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("prchat %s (%s) not ready within 60s:\n%s", p.role, p.name, tail(p.logs, 30))
		}
	}
}

// signal sends sig to p.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// wait waits at most d for p to exit and reports whether it did, and when.
func (p *proc) wait(d time.Duration) (time.Time, bool) {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	select {
	case <-exited:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.exitedAt, true
	case <-time.After(d):
		return time.Time{}, false
	}
}

// running reports whether p's process is alive.
func (p *proc) running() bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// kill stops p at once and waits until it is gone.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	p.signal(syscall.SIGCONT) // a stopped process cannot die of SIGKILL until woken on some kernels
	p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)
}

func (c *cluster) stopAll() {
	for _, p := range append(append([]*proc{}, c.workers...), c.apis...) {
		p.kill()
	}
	if c.t.Failed() {
		for _, p := range append(append([]*proc{}, c.apis...), c.workers...) {
			c.t.Logf("%s/%s log, last lines:\n%s", c.name, p.name, tail(p.logs, 40))
		}
	}
}

// apiURL returns the base URL of the first API that runs.
func (c *cluster) apiURL() string {
	for _, p := range c.apis {
		if p.running() {
			return "http://" + p.listen
		}
	}
	return "http://" + c.apis[0].listen
}

// forbidden lists what no client may ever read: how to reach the
// database and Redis, who prchat is to them, where its files and binary
// are, the keys it holds.
func (c *cluster) forbidden() []string {
	f := []string{
		c.dbURL, lab.pg.url(""),
		fmt.Sprintf("127.0.0.1:%d", lab.pg.port), fmt.Sprintf(":%d", lab.pg.port), fmt.Sprintf("port %d", lab.pg.port),
		fmt.Sprintf("127.0.0.1:%d", c.redis.port), fmt.Sprintf(":%d", c.redis.port),
		"postgres", dbUser, "sslmode", "sqlstate", "pgx", "gorm", "dial tcp", "connection refused", "redis://",
		"chaos_" + c.name, "chaos-secret-key", "sk-chaos-",
		lab.bin, lab.pg.dir, c.dir,
	}
	if c.sentinel != nil {
		f = append(f, "redis-sentinel://", c.sentinel.password)
		for _, r := range append([]*redisServer{c.sentinel.replica}, c.sentinel.sentinels...) {
			f = append(f, r.addr(), fmt.Sprintf(":%d", r.port))
		}
	}
	return f
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	lines, err := fileLines(path)
	if err != nil {
		return err.Error()
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// grepLines returns the first n lines of the file at path that hold any of
// words.
func grepLines(path string, words []string, n int) string {
	lines, err := fileLines(path)
	if err != nil {
		return err.Error()
	}
	var found []string
	for _, line := range lines {
		if len(found) == n {
			break
		}
		if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(line, w) }) {
			found = append(found, line)
		}
	}
	return strings.Join(found, "\n")
}

// fileLines returns the lines of the file at path (a log), up to the first
// longer than 1 MB.
func fileLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
