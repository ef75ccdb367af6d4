package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prchat/prchat/cmd/internal/freeaddr"
)

const (
	// daemonStartTimeout bounds how long a daemon under test may take to
	// answer /readyz (or to send its first heartbeat).
	daemonStartTimeout = 60 * time.Second
	// daemonStopTimeout is how long a daemon under test gets to stop after
	// SIGTERM before it is killed.
	daemonStopTimeout = 20 * time.Second
	// forwardedLogLines is how many log lines of each daemon are copied to
	// the bench's stderr; the rest are only counted.
	forwardedLogLines = 20
)

// benchDaemon is one daemon under test: a child process running
// `prchat serve|api|worker`.
type benchDaemon struct {
	role     string // serve, api or worker
	name     string // how the report and the logs call it
	workerID string
	url      string // base URL of its API; "" for a worker
	metrics  string // base URL of its /metrics (a worker's probes too)

	cmd    *exec.Cmd
	exited chan struct{} // closed when the child has exited
	err    error         // the child's exit, once exited is closed
	logs   *daemonLog
}

// daemonEnv returns the settings of a daemon under test as PRCHAT_*
// variables.
func (b *bencher) daemonEnv(name, listen string) map[string]string {
	env := map[string]string{
		"PRCHAT_DATA_DIR":     b.dataDir,
		"PRCHAT_LISTEN":       listen,
		"PRCHAT_LOG_LEVEL":    "warn",
		"PRCHAT_LOG_FORMAT":   "text",
		"PRCHAT_WORKER_ID":    "bench-" + name,
		"PRCHAT_CONCURRENCY":  strconv.Itoa(b.cfg.Concurrency),
		"PRCHAT_DATABASE_URL": b.daemonDatabaseURL(),
		"PRCHAT_REDIS_URL":    b.cfg.RedisURL,
	}
	return env
}

// freeAddr returns a free TCP address on 127.0.0.1 that the bench has not
// handed out before (another process may still take it: startDaemonWith
// tries again then).
func freeAddr() (string, error) { return daemonAddrs.Next() }

// daemonAddrs are the addresses the bench handed out to its daemons.
var daemonAddrs freeaddr.Book

// startDaemon starts a daemon under test with role serve, api or worker
// and waits until it is ready: its API answers /readyz, or (a worker) its
// heartbeat is in Redis. The serve daemon runs in this process when the
// bench profiles.
func (b *bencher) startDaemon(ctx context.Context, role, name string) (*benchDaemon, error) {
	return b.startDaemonWith(ctx, role, name, nil)
}

// startDaemonWith is startDaemon with settings that replace the bench's
// own (e.g. PRCHAT_CONCURRENCY).
func (b *bencher) startDaemonWith(ctx context.Context, role, name string, settings map[string]string) (*benchDaemon, error) {
	// The free port found may be taken by another process before the
	// daemon binds it: then try another.
	for attempt := 1; ; attempt++ {
		d, err := b.startDaemonOnce(ctx, role, name, settings)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return d, err
		}
	}
}

func (b *bencher) startDaemonOnce(ctx context.Context, role, name string, settings map[string]string) (*benchDaemon, error) {
	listen, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := b.daemonEnv(name, listen)
	maps.Copy(env, settings)
	d := &benchDaemon{role: role, name: name, workerID: env["PRCHAT_WORKER_ID"], metrics: "http://" + listen}
	if role != "worker" {
		d.url = "http://" + listen
	}
	if err := b.startChild(d, env); err != nil {
		return nil, err
	}
	b.daemons = append(b.daemons, d)
	if err := b.waitReady(ctx, d); err != nil {
		b.stopDaemon(d)
		return nil, err
	}
	return d, nil
}

// startChild starts d as a child process.
func (b *bencher) startChild(d *benchDaemon, settings map[string]string) error {
	args := append(append([]string{}, b.cfg.Command[1:]...), d.role)
	if b.cfg.CPUProfile != "" {
		// A child profiles itself, to a file of its own beside the bench's.
		args = append(args, "--cpuprofile", childProfile(b.cfg.CPUProfile, len(b.daemons)+1, d.name))
	}
	cmd := exec.Command(b.cfg.Command[0], args...)
	// The daemon gets the bench's environment without any PRCHAT_*
	// setting of the caller's, then its own.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PRCHAT_") {
			env = append(env, kv)
		}
	}
	for k, v := range settings {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	cmd.Env = append(env, b.cfg.Env...)
	d.logs = &daemonLog{name: d.name, w: b.stderr}
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start prchat %s: %w", d.role, err)
	}
	d.cmd, d.exited = cmd, make(chan struct{})
	go func() {
		d.err = cmd.Wait()
		close(d.exited)
	}()
	return nil
}

// childProfile names the CPU profile of the n-th daemon the bench starts,
// name, beside the bench's own profile file.
func childProfile(file string, n int, name string) string {
	return fmt.Sprintf("%s.%d-%s", file, n, name)
}

// waitReady waits until d answers.
func (b *bencher) waitReady(ctx context.Context, d *benchDaemon) error {
	ctx, cancel := context.WithTimeout(ctx, daemonStartTimeout)
	defer cancel()
	for {
		if d.exited != nil {
			select {
			case <-d.exited:
				return fmt.Errorf("prchat %s exited at start (%v): %s", d.role, d.err, d.logs.tail())
			default:
			}
		}
		ready, err := b.ready(ctx, d)
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("prchat %s is not ready after %s: %v %s", d.role, daemonStartTimeout, err, d.logs.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ready asks d once whether it is ready.
func (b *bencher) ready(ctx context.Context, d *benchDaemon) (bool, error) {
	if d.url == "" {
		return b.hosts.Alive(ctx, d.workerID)
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, d.url+"/readyz", nil)
	if err != nil {
		return false, err
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return false, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// rss returns the resident set size of d's process.
func (d *benchDaemon) rss() (int64, error) {
	return processRSS(d.cmd.Process.Pid)
}

// cpu returns the CPU time d's process has used.
func (d *benchDaemon) cpu() (time.Duration, error) {
	return processCPU(d.cmd.Process.Pid)
}

// cpuFine is cpu to the nanosecond (processCPUFine).
func (d *benchDaemon) cpuFine() (time.Duration, error) {
	return processCPUFine(d.cmd.Process.Pid)
}

// stopDaemon stops d: SIGTERM, then SIGKILL after daemonStopTimeout. Safe to
// call twice.
func (b *bencher) stopDaemon(d *benchDaemon) {
	if d.cmd == nil {
		return
	}
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		return
	case <-time.After(daemonStopTimeout):
	}
	// SIGQUIT makes a Go program print its goroutines and exit: where it
	// hangs.
	d.logs.capture()
	_ = d.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-d.exited:
	case <-time.After(5 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	where := "its goroutines could not be written: "
	f, err := os.CreateTemp("", "prchat-bench-"+d.name+"-*.goroutines")
	if err == nil {
		_, err = f.Write(d.logs.captured())
		err = errors.Join(err, f.Close())
	}
	if err == nil {
		where = "its goroutines are in " + f.Name()
	} else {
		where += err.Error()
	}
	fmt.Fprintf(b.stderr, "prchat-bench: %s did not stop within %s; killed it (%s)\n", d.name, daemonStopTimeout, where)
}

// daemonLog copies the first lines a daemon under test logs to the
// bench's stderr, prefixed with its name, counts the rest, and keeps the
// last bytes for an error message.
type daemonLog struct {
	name string
	w    io.Writer

	mu         sync.Mutex
	partial    []byte
	lines      int
	last       []byte
	suppressed bool
	// all, once capture was called, is everything written since
	all *bytes.Buffer
}

// capture keeps everything the daemon writes from now on.
func (l *daemonLog) capture() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = new(bytes.Buffer)
}

// captured is what the daemon wrote since capture.
func (l *daemonLog) captured() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.all == nil {
		return nil
	}
	return bytes.Clone(l.all.Bytes())
}

const daemonLogTail = 2048

// Write copies a chunk of the daemon's output.
func (l *daemonLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.all != nil {
		l.all.Write(p)
	}
	l.last = append(l.last, p...)
	if len(l.last) > 2*daemonLogTail {
		l.last = append([]byte(nil), l.last[len(l.last)-daemonLogTail:]...)
	}
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := l.partial[:i]
		l.lines++
		switch {
		case l.lines <= forwardedLogLines:
			fmt.Fprintf(l.w, "[%s] %s\n", l.name, line)
		case !l.suppressed:
			l.suppressed = true
			fmt.Fprintf(l.w, "[%s] (more log lines are not shown)\n", l.name)
		}
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) > 64<<10 {
		l.partial = l.partial[:0]
	}
	return len(p), nil
}

// count returns how many lines the daemon logged.
func (l *daemonLog) count() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines
}

// tail returns the last lines the daemon logged, for an error message.
func (l *daemonLog) tail() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.last
	if len(t) > daemonLogTail {
		t = t[len(t)-daemonLogTail:]
	}
	if len(t) == 0 {
		return ""
	}
	return "\n" + strings.TrimSpace(string(t))
}
