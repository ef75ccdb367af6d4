// Command prchat-bench measures the prchat daemon against the floor its
// parts allow, side by side on one machine. It starts the daemons under
// test as child processes, as a user would (prchat serve, api and worker,
// from a prchat binary built with -tags prchatbench, which registers the
// benchagent backend: an agent that answers at once or sleeps and streams
// events as its question asks), drives them through their HTTP API and
// prints a table of figures; it asserts nothing of them. Its running phase holds many slow
// turns on one worker, then kills that worker to time the takeover. On
// Postgres and Redis the throughput phase also measures the api with worker
// processes, the workers alone, and asynq's own floor, and accounts for the
// CPU of every process a turn passes through.
//
//	go build -tags prchatbench -o bin/prchat-benchd ./cmd/prchat
//	go build -o bin/prchat-bench ./cmd/prchat-bench
//	bin/prchat-bench [--prchat bin/prchat-benchd] [flags]
//
// (make bench-build builds both.)
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's pgx driver, for openPostgres
	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/cmd/prchat-bench/benchagent"
	"github.com/prchat/prchat/store"
	"github.com/prchat/prchat/worker"
)

// The phases `prchat-bench --only` can select.
const (
	phaseIntake     = "intake"
	phaseOverhead   = "overhead"
	phaseThroughput = "throughput"
	phaseMemory     = "memory"
	phaseEvents     = "events"
	phaseRunning    = "running"
	phaseSessions   = "sessions"
	phaseCLIs       = "clis"
)

// allPhases lists the phases in the order they run.
func allPhases() []string {
	return []string{phaseIntake, phaseOverhead, phaseThroughput, phaseMemory, phaseEvents, phaseRunning, phaseSessions, phaseCLIs}
}

// Usage is the text of `prchat-bench --help` before its flags.
const Usage = `Usage: prchat-bench [flags]

Measures the daemon against the floor its parts allow, side by side on this
machine: intake (P1) against an in-process floor, turn overhead (P2),
throughput (P3), memory (P7), live event delivery, and many slow turns
running at once on one worker (--running-turns, its memory, CPU, event
delivery and heartbeat, then the takeover when it is killed), and what
agent sessions travelling cost (upload, store and restore of 100 KB, 1 MB
and 10 MB session files; a restore is what it adds to a turn), and turns
on the real Claude Code and Codex CLIs (--claude-bin, --codex-bin; each
skipped when not found) held waiting on fake model APIs in the bench:
RSS and CPU per running turn of each CLI's process tree. The daemons
under test are child processes of this one (prchat serve, api, worker) of
a prchat binary built with -tags prchatbench (--prchat; default
prchat-benchd beside this program), whose zero-latency agent answers, so
only prchat itself is measured. With no URLs it uses the embedded SQLite and an in-process Redis
(the running phase then runs on a serve daemon, without the takeover).

Give --database-url and --redis-url to bench on Postgres and Redis; the
bench makes a schema of its own in that database and drops it when done,
and takes a Redis database that must be empty (e.g. redis://host:6379/14),
which it flushes when done. No PRCHAT_* variable is read. Throughput then
also runs the production topology (an api process with 1, 2 and 4 worker
processes, then the workers alone draining a backlog) beside asynq's own
floor (a no-op handler on the same Redis), and shows per turn the CPU of
Postgres (when it runs on this machine), of Redis and of the bench, the
machine's busy share, the Redis commands and the Postgres transactions.

The events phase (up to 10,000 subscribers by default) holds a socket
per subscriber in the bench and in the API process: the bench raises its
open files limit to the hard limit, which the daemons inherit, and stops
if that is too low.

Flags:
`

// Config is what the bench measures and how. AddFlags fills it in from the
// command line.
type Config struct {
	// Duration is how long each load phase measures: the floor and the
	// intake each (in alternating rounds), the throughput per topology.
	Duration time.Duration
	// Clients is how many HTTP clients (and floor loops) ask at once.
	Clients int
	// Turns is how many sequential turns the overhead phase times.
	Turns int
	// Concurrency is PRCHAT_CONCURRENCY of the daemons under test: by
	// default theirs on this host (worker.DefaultConcurrency), so that the
	// bench measures them as they are deployed.
	Concurrency int
	// RunningTurns is how many slow turns the running phase runs at once
	// on one worker, whose PRCHAT_CONCURRENCY it is.
	RunningTurns int
	// DatabaseURL and RedisURL, if set, are the Postgres and Redis to bench
	// on; else the embedded ones.
	DatabaseURL string
	RedisURL    string
	// PgBouncerURL, if set, is a PgBouncer in transaction pooling mode in
	// front of DatabaseURL's Postgres that the daemons connect through
	// (pgbouncer.go).
	PgBouncerURL string
	// CPUProfile, if set, is the file of the bench's own CPU profile
	// (samples labelled part=bench or part=floor); the daemons write
	// profiles of their own beside it, CPUProfile.<n>-<name> (the n-th
	// daemon started).
	CPUProfile string
	// Phases are the phases to run, of intake, overhead, throughput,
	// memory, events, running and sessions.
	Phases []string
	// Subscribers are the subscriber counts of the events phase.
	Subscribers []int
	// ReconcilerQueued is how many queued turns the reconciler is measured
	// over (throughput, on Redis); 0 skips that measure.
	ReconcilerQueued int
	// DrainRounds is how many times the throughput phase measures the
	// workers alone, each count of them once a round, in an order that
	// turns by one count from round to round; the turns/s compared are
	// the medians over the rounds, so that a change of the machine's
	// speed while the bench runs (the disk's flush latency, another
	// process) does not fall on one count alone.
	DrainRounds int
	// WorkerProcs is the GOMAXPROCS of the workers draining alone (and of
	// the reconciler's measure): "" leaves them Go's own (the cores of the
	// machine, or of the container's limit), "share" gives each of n
	// workers its share of the machine's cores, max(1, cores / n), and a
	// number gives every worker that: a trial of the Go runtime's part in
	// what more processes cost (the README's "Same work, dearer
	// operations").
	WorkerProcs string
	// ClaudeBin and CodexBin are the real agent CLIs of the clis phase (a
	// path or a name in PATH); one that is not found is skipped.
	ClaudeBin, CodexBin string
	// CLITurns is how many turns the clis phase runs at once on each CLI,
	// and CLIHold how long the fake model holds them all waiting.
	CLITurns int
	CLIHold  time.Duration

	// Command starts a daemon under test: a prchat program built with
	// -tags prchatbench and its leading arguments, to which the role
	// (serve, api or worker) is added. Required.
	Command []string
	// Env is added to the environment of the daemons under test.
	Env []string
	// Settle is how long a freshly started daemon is left alone before its
	// idle RSS is read. Default 3s.
	Settle time.Duration
}

func (c Config) has(phase string) bool { return slices.Contains(c.Phases, phase) }

// AddFlags sets c to the defaults and registers the flags of `prchat
// bench` that set it on fs, with Usage as fs's usage text.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	c.Phases = allPhases()
	c.Subscribers = []int{100, 500, 2000, 10000}
	c.Settle = 3 * time.Second
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "how long each load phase measures (floor, intake, throughput per topology)")
	fs.IntVar(&c.Clients, "clients", 64, "concurrent HTTP clients (and floor loops)")
	fs.IntVar(&c.Turns, "turns", 200, "sequential turns timed by the overhead phase")
	fs.IntVar(&c.Concurrency, "concurrency", worker.DefaultConcurrency(), "PRCHAT_CONCURRENCY of the daemons under test (turns a worker runs at once); the default is theirs on this host")
	fs.IntVar(&c.RunningTurns, "running-turns", 200, "slow turns the running phase runs at once on one worker (its PRCHAT_CONCURRENCY)")
	fs.StringVar(&c.DatabaseURL, "database-url", "", "Postgres URL to bench on (a schema of its own is made and dropped); empty: embedded SQLite")
	fs.StringVar(&c.RedisURL, "redis-url", "", "Redis URL of an empty database to bench on (flushed when done); empty: in-process Redis")
	fs.StringVar(&c.PgBouncerURL, "pgbouncer-url", "", "a PgBouncer (transaction pooling, roles looked up with auth_query) in front of --database-url's Postgres: the daemons connect through it as a role the bench makes")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write the bench's CPU profile here (samples labelled part=bench or part=floor); the daemons write theirs to FILE.<n>-<name>")
	fs.Var(phaseList{&c.Phases}, "only", "phases to run, of "+strings.Join(allPhases(), ","))
	fs.Var(countList{&c.Subscribers}, "subscribers", "subscriber counts of the events phase")
	fs.IntVar(&c.DrainRounds, "drain-rounds", 3, "rounds of the workers-alone drains (1, 2, 4 and 8 workers each round, in a turning order); their medians are compared")
	fs.StringVar(&c.WorkerProcs, "worker-gomaxprocs", "", `GOMAXPROCS of the workers draining alone: "" Go's own, "share" each of n workers max(1, cores / n), or a number`)
	fs.StringVar(&c.ClaudeBin, "claude-bin", "claude", "the Claude Code CLI of the clis phase (skipped when not found)")
	fs.StringVar(&c.CodexBin, "codex-bin", "codex", "the Codex CLI of the clis phase (skipped when not found)")
	fs.IntVar(&c.CLITurns, "cli-turns", 4, "turns the clis phase runs at once on each agent CLI")
	fs.DurationVar(&c.CLIHold, "cli-hold", 5*time.Second, "how long the clis phase's fake model keeps all the CLIs waiting")
	fs.IntVar(&c.ReconcilerQueued, "reconciler-queued", 10_000, "queued turns the reconciler is measured over with 1, 2, 4 and 8 workers (throughput, with --redis-url); 0 skips it")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), Usage)
		fs.PrintDefaults()
	}
}

// Check reports a setting out of its range.
func (c Config) Check() error {
	switch {
	case c.Duration < 100*time.Millisecond || c.Duration > time.Hour:
		return errors.New("--duration must be between 100ms and 1h")
	case c.Clients < 1 || c.Clients > 4096:
		return errors.New("--clients must be between 1 and 4096")
	case c.Turns < 1 || c.Turns > 100_000:
		return errors.New("--turns must be between 1 and 100000")
	case c.Concurrency < 1 || c.Concurrency > 1000:
		return errors.New("--concurrency must be between 1 and 1000")
	case c.RunningTurns < 1 || c.RunningTurns > 1000:
		return errors.New("--running-turns must be between 1 and 1000")
	case len(c.Phases) == 0:
		return errors.New("--only names no phase")
	case c.PgBouncerURL != "" && c.DatabaseURL == "":
		return errors.New("--pgbouncer-url needs --database-url (the Postgres behind it)")
	case checkPgBouncerURL(c.PgBouncerURL) != nil:
		return checkPgBouncerURL(c.PgBouncerURL)
	case c.CLITurns < 1 || c.CLITurns > 64:
		return errors.New("--cli-turns must be between 1 and 64")
	case c.CLIHold < time.Second || c.CLIHold > 10*time.Minute:
		return errors.New("--cli-hold must be between 1s and 10m")
	case c.DrainRounds < 1 || c.DrainRounds > 9:
		return errors.New("--drain-rounds must be between 1 and 9")
	case c.WorkerProcs != "" && c.WorkerProcs != "share" && !positiveInt(c.WorkerProcs):
		return errors.New(`--worker-gomaxprocs must be "", "share" or a number of at least 1`)
	case c.ReconcilerQueued < 0 || c.ReconcilerQueued > 100_000:
		return errors.New("--reconciler-queued must be between 0 and 100000")
	case c.has(phaseEvents) && len(c.Subscribers) == 0:
		return errors.New("--subscribers names no count")
	}
	return nil
}

// positiveInt reports whether s is a whole number of at least 1.
func positiveInt(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1
}

// workerProcs is the GOMAXPROCS of each of n workers draining alone, ""
// for Go's own (see Config.WorkerProcs).
func (c Config) workerProcs(n int) string {
	if c.WorkerProcs == "share" {
		return strconv.Itoa(max(1, runtime.NumCPU()/n))
	}
	return c.WorkerProcs
}

// phaseList is the value of --only: phase names, comma-separated.
type phaseList struct{ p *[]string }

func (l phaseList) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l phaseList) Set(v string) error {
	var phases []string
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		switch {
		case p == "" || slices.Contains(phases, p):
		case !slices.Contains(allPhases(), p):
			return fmt.Errorf("unknown phase %q (want some of %s)", p, strings.Join(allPhases(), ","))
		default:
			phases = append(phases, p)
		}
	}
	*l.p = phases
	return nil
}

// countList is the value of --subscribers: counts, comma-separated.
type countList struct{ p *[]int }

func (l countList) String() string {
	if l.p == nil {
		return ""
	}
	s := make([]string, len(*l.p))
	for i, n := range *l.p {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l countList) Set(v string) error {
	var counts []int
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 20_000 {
			return fmt.Errorf("%q is not a count between 1 and 20000", s)
		}
		counts = append(counts, n)
	}
	*l.p = counts
	return nil
}

// bencher is one run of the bench.
type bencher struct {
	cfg            Config
	stdout, stderr io.Writer

	dir     string // the bench's temporary directory
	dataDir string // PRCHAT_DATA_DIR of the daemons
	repoDir string // the git repository the review is about
	head    string // its head commit

	// databaseURL and floorURL are the Postgres URLs (search_path set to
	// the bench's schemas) of the daemons and of the floor; "" embedded.
	databaseURL string
	floorURL    string
	schemas     []string
	// daemonURL is the daemons' URL through PgBouncer (--pgbouncer-url),
	// as the role of roles the bench made for it; "" without.
	daemonURL string
	roles     []string
	// daemonApp is the application_name of the daemons' connections.
	daemonApp  string
	rdb        redis.UniversalClient // the given Redis; nil embedded
	flushRedis bool
	hosts      *worker.Hosts
	db         *store.Store // the daemons' database, to count turns
	pg         *sql.DB      // the same on Postgres, for the server's statistics
	http       *http.Client
	askPath    string
	daemons    []*benchDaemon
	rep        report
	perf       perfState // what the throughput phase found so far
	// ownQueries counts the statements the bench itself runs on the
	// daemons' database, which the Postgres counts per turn leave out.
	ownQueries atomic.Int64
	// vacuums are the vacuums between windows (bencher.vacuum).
	vacuums struct {
		n      int
		took   time.Duration
		failed bool
	}
}

// Run runs the bench cfg describes and prints its report to stdout; the
// daemons' first log lines go to stderr. It takes every setting from cfg
// (no environment variable), so that the PRCHAT_DATABASE_URL or
// PRCHAT_REDIS_URL of a real daemon is never benched on, and flushed, by
// accident.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) (err error) {
	if err := cfg.Check(); err != nil {
		return err
	}
	if len(cfg.Command) == 0 {
		return errors.New("bench: no command to start the daemons with")
	}
	if cfg.has(phaseEvents) {
		// A socket per subscriber on each side, and what a daemon opens
		// besides.
		if err := raiseFileLimit(slices.Max(cfg.Subscribers) + 1024); err != nil {
			return err
		}
	}
	cfg.Settle = cmp.Or(cfg.Settle, 3*time.Second)
	b := &bencher{cfg: cfg, stdout: stdout, stderr: stderr, http: newLoadClient(2 * cfg.Clients)}
	if b.dir, err = os.MkdirTemp("", "prchat-bench-"); err != nil {
		return err
	}
	defer os.RemoveAll(b.dir)
	b.dataDir = filepath.Join(b.dir, "data")
	defer b.cleanup()
	if err := b.setup(ctx); err != nil {
		return err
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	b.header(ctx)
	pprof.Do(ctx, pprof.Labels("part", "bench"), func(ctx context.Context) { err = b.run(ctx) })
	b.noteLogs()
	b.rep.print(stdout)
	if err != nil {
		return err
	}
	return ctx.Err()
}

// noteLogs notes how many lines the daemons logged (at warn level and
// above; the first of each are on stderr).
func (b *bencher) noteLogs() {
	counts := map[string]int{}
	var names []string
	for _, d := range b.daemons {
		if n := d.logs.count(); n > 0 {
			if counts[d.name] == 0 {
				names = append(names, d.name)
			}
			counts[d.name] += n
		}
	}
	for _, name := range names {
		b.rep.note(fmt.Sprintf("%s logged %d lines at warn level or above (the first ones are on stderr)", name, counts[name]))
	}
}

// setup makes the repository, the Postgres schemas and checks the Redis.
func (b *bencher) setup(ctx context.Context) error {
	var err error
	if b.repoDir, b.head, err = makeBenchRepo(ctx, filepath.Join(b.dir, "repo")); err != nil {
		return err
	}
	if b.cfg.DatabaseURL != "" {
		if err := b.makeSchemas(ctx); err != nil {
			return err
		}
	}
	if b.cfg.RedisURL != "" {
		if b.rdb, err = worker.OpenRedis(ctx, b.cfg.RedisURL); err != nil {
			return err
		}
		n, err := b.rdb.DBSize(ctx).Result()
		if err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		if n > 0 {
			return fmt.Errorf("the Redis database of --redis-url holds %d keys; give the bench an empty database (e.g. redis://127.0.0.1:6379/14): it flushes it when done", n)
		}
		b.flushRedis = true
		b.hosts = worker.NewHosts(b.rdb, worker.HostsConfig{})
	}
	return nil
}

// makeSchemas makes the schemas of the daemons and of the floor.
func (b *bencher) makeSchemas(ctx context.Context) error {
	var r [6]byte
	_, _ = rand.Read(r[:])
	base := "prchat_bench_" + hex.EncodeToString(r[:])
	b.daemonApp = base
	admin, err := openPostgres(b.cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer admin.Close()
	for _, s := range []string{base, base + "_floor"} {
		if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+s); err != nil {
			return fmt.Errorf("create schema %s: %w", s, err)
		}
		b.schemas = append(b.schemas, s)
	}
	if b.cfg.PgBouncerURL != "" {
		if err := b.makeBouncerRole(ctx, admin, base); err != nil {
			return err
		}
	}
	if b.databaseURL, err = withSearchPath(b.cfg.DatabaseURL, base); err != nil {
		return err
	}
	b.floorURL, err = withSearchPath(b.cfg.DatabaseURL, base+"_floor")
	return err
}

// withSearchPath returns a Postgres URL whose connections use schema.
func withSearchPath(raw, schema string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse --database-url: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// cleanup stops the daemons and removes what the bench made in Postgres
// and Redis, whatever happened before.
func (b *bencher) cleanup() {
	for i := len(b.daemons) - 1; i >= 0; i-- {
		b.stopDaemon(b.daemons[i])
	}
	if b.db != nil {
		_ = b.db.Close()
	}
	if b.pg != nil {
		_ = b.pg.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(b.schemas) > 0 {
		if admin, err := openPostgres(b.cfg.DatabaseURL); err == nil {
			for _, s := range b.schemas {
				if _, err := admin.ExecContext(ctx, "DROP SCHEMA "+s+" CASCADE"); err != nil {
					fmt.Fprintf(b.stderr, "prchat-bench: drop schema %s: %v\n", s, err)
				}
			}
			b.dropBouncerRoles(ctx, admin)
			_ = admin.Close()
		} else {
			fmt.Fprintf(b.stderr, "prchat-bench: drop schemas %v: %v\n", b.schemas, err)
		}
	}
	if b.rdb != nil {
		if b.flushRedis {
			if err := b.rdb.FlushDB(ctx).Err(); err != nil {
				fmt.Fprintf(b.stderr, "prchat-bench: flush the Redis database: %v\n", err)
			}
		}
		_ = b.rdb.Close()
	}
}

// makeBenchRepo makes the git repository the bench's review is about: one
// commit with bench.txt, which the bench agent cites.
func makeBenchRepo(ctx context.Context, dir string) (string, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.txt"), []byte("bench\n"), 0o644); err != nil {
		return "", "", err
	}
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "user.name=prchat bench", "-c", "user.email=bench@localhost", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
		}
		return strings.TrimSpace(string(out)), nil
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "bench.txt"}, {"commit", "-q", "-m", "bench"}} {
		if _, err := git(args...); err != nil {
			return "", "", fmt.Errorf("make the bench repository: %w", err)
		}
	}
	head, err := git("rev-parse", "HEAD")
	if err != nil {
		return "", "", fmt.Errorf("make the bench repository: %w", err)
	}
	return dir, head, nil
}

// header prints what the bench runs on.
func (b *bencher) header(ctx context.Context) {
	db, rd := "embedded SQLite", "in-process Redis"
	if b.cfg.DatabaseURL != "" {
		db = "Postgres " + redactedHost(b.cfg.DatabaseURL)
	}
	if b.cfg.PgBouncerURL != "" {
		db += " (the daemons through PgBouncer " + redactedHost(b.cfg.PgBouncerURL) + ", transaction pooling)"
	}
	if b.cfg.RedisURL != "" {
		rd = "Redis " + redactedHost(b.cfg.RedisURL)
	}
	load := ""
	if l := loadAverage(); l != "" {
		load = ", load average " + l + " at start"
	}
	fmt.Fprintf(b.stdout, "prchat-bench: %s + %s; %d CPUs%s; %s %s/%s\n", db, rd, runtime.NumCPU(), load, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	pages := memoryPages()
	if hp := b.postgresHugePages(ctx); hp != "" {
		pages = strings.TrimPrefix(pages+"; Postgres "+hp, "; ")
	}
	if pages != "" {
		fmt.Fprintf(b.stdout, "memory pages: %s\n", pages)
	}
	fmt.Fprintf(b.stdout, "%d clients, %s per load phase, worker concurrency %d, bench agent (zero latency; each turn forks the review's session)\n",
		b.cfg.Clients, b.cfg.Duration, b.cfg.Concurrency)
	if b.cfg.CPUProfile != "" {
		fmt.Fprintf(b.stdout, "profiling: the serve daemon runs inside the bench (samples labelled part=daemon; the bench's own are part=bench and part=floor); the api and workers write %s.<n>-<name>\n", b.cfg.CPUProfile)
	}
	fmt.Fprintln(b.stdout)
}

// postgresHugePages says whether the bench's Postgres maps its shared
// memory in huge pages: huge_pages_status where the server has it
// (Postgres 17 on), else its huge_pages setting; "" without Postgres.
func (b *bencher) postgresHugePages(ctx context.Context) string {
	if b.cfg.DatabaseURL == "" {
		return ""
	}
	db, err := openPostgres(b.cfg.DatabaseURL)
	if err != nil {
		return ""
	}
	defer db.Close()
	var v string
	if db.QueryRowContext(ctx, `SHOW huge_pages_status`).Scan(&v) == nil {
		return "huge pages " + v
	}
	if err := db.QueryRowContext(ctx, `SHOW huge_pages`).Scan(&v); err != nil {
		return ""
	}
	return "huge_pages=" + v + " (whether in use, Postgres 17 tells)"
}

// redactedHost shows a URL's host and path only.
func redactedHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Host + u.Path
}

// run runs the selected phases. Each phase starts on a freshly started
// daemon against the same database, so that what one phase leaves behind
// in a process (the embedded Redis' keys, a grown heap) does not weigh on
// the next.
func (b *bencher) run(ctx context.Context) error {
	c := b.cfg
	serve, err := b.startDaemon(ctx, "serve", "serve")
	if err != nil {
		return err
	}
	if err := b.prepare(ctx, serve.url); err != nil {
		return err
	}
	if c.has(phaseMemory) {
		b.idleMemory(ctx, serve)
	}
	phases := []struct {
		on  bool
		run func(context.Context, *benchDaemon) error
	}{
		{c.has(phaseIntake), b.intake},
		{c.has(phaseOverhead), b.overhead},
		{c.has(phaseSessions), b.sessions},
		{c.has(phaseThroughput) || c.has(phaseMemory), func(ctx context.Context, serve *benchDaemon) error {
			return b.throughput(ctx, "1 serve", serve, []*benchDaemon{serve})
		}},
	}
	for _, p := range phases {
		if !p.on {
			continue
		}
		if serve == nil {
			if serve, err = b.startDaemon(ctx, "serve", "serve"); err != nil {
				return err
			}
		}
		err := p.run(ctx, serve)
		b.stopDaemon(serve)
		serve = nil
		if err != nil {
			return err
		}
	}
	if serve != nil {
		b.stopDaemon(serve)
	}
	split := b.rdb != nil
	if c.has(phaseEvents) && !split {
		for _, n := range c.Subscribers {
			fresh, err := b.startDaemon(ctx, "serve", "serve")
			if err != nil {
				return err
			}
			err = b.events(ctx, fresh, n)
			b.stopDaemon(fresh)
			if err != nil {
				return err
			}
		}
	}
	if c.has(phaseThroughput) || c.has(phaseEvents) || c.has(phaseIntake) || c.has(phaseMemory) {
		if !split && c.has(phaseThroughput) {
			b.rep.note("throughput with 2 worker processes needs --redis-url (and --database-url): the embedded Redis lives inside one serve process")
		}
		if split {
			if err := b.runSplit(ctx); err != nil {
				return err
			}
		}
	}
	if c.has(phaseRunning) {
		if err := b.running(ctx); err != nil {
			return err
		}
	}
	if c.has(phaseCLIs) {
		if err := b.clis(ctx); err != nil {
			return err
		}
	}
	b.noteVacuums(ctx)
	return ctx.Err()
}

// runSplit runs the phases of the production topology: one api process and
// worker processes, against the given Redis (and Postgres).
func (b *bencher) runSplit(ctx context.Context) error {
	c := b.cfg
	if c.has(phaseThroughput) {
		// asynq by itself, before any daemon shares the machine with it.
		if err := b.queueFloorRun(ctx); err != nil {
			return err
		}
	}
	api, err := b.startDaemon(ctx, "api", "api")
	if err != nil {
		return err
	}
	if c.has(phaseIntake) {
		// The API alone, with no worker taking a share of the machine: the
		// cost of the HTTP path against the floor.
		if err := b.intakeOn(ctx, api, "api alone", false); err != nil {
			return err
		}
		b.rep.note("intake (api alone): no worker runs meanwhile; the turns stay queued until worker-1 starts and works them off")
	}
	w1, err := b.startDaemon(ctx, "worker", "worker-1")
	if err != nil {
		return err
	}
	if c.has(phaseIntake) {
		if _, _, err := b.drain(ctx, b.drainLimit()); err != nil {
			return fmt.Errorf("intake: wait for the asked turns: %w", err)
		}
	}
	if c.has(phaseMemory) {
		// Settled, with nothing asked: what the worker's idle polls,
		// heartbeats and reconciler cost, and the api's beside it.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.cfg.Settle):
		}
		b.idleCPU(ctx, w1, api)
	}
	if c.has(phaseThroughput) {
		if w1, err = b.splitThroughput(ctx, api, w1); err != nil {
			return err
		}
	}
	if c.has(phaseEvents) {
		// A fresh API process for every count, so that each starts from the
		// same memory.
		b.stopDaemon(api)
		for _, n := range c.Subscribers {
			fresh, err := b.startDaemon(ctx, "api", "api")
			if err != nil {
				return err
			}
			err = b.events(ctx, fresh, n)
			b.stopDaemon(fresh)
			if err != nil {
				return err
			}
		}
	}
	b.stopDaemon(w1)
	b.stopDaemon(api)
	return ctx.Err()
}

// prepare registers the repository and records the review (once per
// database), and opens the daemons' database to count turns.
func (b *bencher) prepare(ctx context.Context, base string) error {
	if err := b.postJSON(ctx, base+"/api/v1/repos", map[string]string{"name": "bench/repo", "clone_path": b.repoDir},
		http.StatusCreated, http.StatusOK); err != nil {
		return fmt.Errorf("register the bench repository: %w", err)
	}
	// The review kept a session whose run directory is the repository
	// itself: each first question forks it, the usual case of a
	// claude-code or codex review, and no run directory is made per turn.
	if err := b.postJSON(ctx, base+"/api/v1/repos/bench/repo/pulls/1/reviews", map[string]string{
		"head_sha": b.head, "backend": benchagent.Backend, "session_id": "bench-review", "run_dir": b.repoDir,
		"markdown": "The bench review.",
	}, http.StatusCreated); err != nil {
		return fmt.Errorf("record the bench review: %w", err)
	}
	b.askPath = "/api/v1/repos/bench/repo/pulls/1/reviews/1/conversations"
	sc := store.Config{DatabaseURL: b.databaseURL, MaxOpenConns: 2}
	if b.databaseURL == "" {
		sc.SQLitePath = filepath.Join(b.dataDir, "prchat.db")
	}
	var err error
	if b.db, err = store.Open(ctx, sc); err != nil {
		return fmt.Errorf("open the daemon's database: %w", err)
	}
	if b.databaseURL != "" {
		if b.pg, err = openPostgres(b.databaseURL); err != nil {
			return err
		}
	}
	return nil
}

// openPostgres opens a connection of the bench's own to the Postgres of
// url, for what is not prchat's data: its schemas and the server's
// statistics.
func openPostgres(url string) (*sql.DB, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("open Postgres: %w", err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}
