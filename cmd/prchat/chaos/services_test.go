//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prchat/prchat/cmd/internal/freeaddr"
	"github.com/redis/go-redis/v9"
)

// postgres is a Postgres server of the suite's own: a cluster made by
// initdb in a temporary directory, listening on 127.0.0.1 on a free port,
// that the suite stops and starts again. Postgres refuses to run as root:
// then it runs as the user postgres (or nobody), the directory chowned to
// it.
type postgres struct {
	bin  string // directory of initdb and postgres
	dir  string // owns data/ and the log
	data string
	port int
	cred *syscall.Credential // nil: run as the current user

	cmd    *exec.Cmd
	exited chan struct{}
}

// findPostgresBin returns the directory of the newest installed Postgres's
// binaries: PRCHAT_CHAOS_PG_BIN, the directory of initdb on PATH, or
// Debian's /usr/lib/postgresql/<version>/bin.
func findPostgresBin() (string, error) {
	if d := os.Getenv("PRCHAT_CHAOS_PG_BIN"); d != "" {
		return d, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no Postgres binaries: install postgresql or set PRCHAT_CHAOS_PG_BIN to the directory of initdb")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// unprivileged returns the credential Postgres runs under when this
// process is root, and nil otherwise.
func unprivileged() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
	}
	return nil, errors.New("running as root and there is no user postgres or nobody to run Postgres as")
}

// dbUser is the superuser of the suite's cluster: a name no client text
// has any reason to hold.
const dbUser = "chaos_dbadmin"

// startPostgres makes a new cluster and starts it.
func startPostgres() (*postgres, error) {
	bin, err := findPostgresBin()
	if err != nil {
		return nil, err
	}
	cred, err := unprivileged()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "prchat-chaos-pg-")
	if err != nil {
		return nil, err
	}
	p := &postgres{bin: bin, dir: dir, data: filepath.Join(dir, "data"), cred: cred}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	initdb := p.command(filepath.Join(bin, "initdb"), "-D", p.data, "-U", dbUser, "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	p.port, _ = strconv.Atoi(port)
	return p, p.start()
}

func (p *postgres) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = p.dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "TZ=UTC"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	return cmd
}

// start runs the server and waits until it takes connections.
func (p *postgres) start() error {
	logf, err := os.OpenFile(filepath.Join(p.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := p.command(filepath.Join(p.bin, "postgres"), "-D", p.data, "-p", strconv.Itoa(p.port), "-k", p.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=400", "-c", "shared_buffers=64MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(context.Background(), p.url("postgres")) // the maintenance database
		if err == nil {
			_ = conn.Close(context.Background())
			return nil
		}
		select {
		case <-p.exited:
			log, _ := os.ReadFile(filepath.Join(p.dir, "postgres.log"))
			return fmt.Errorf("postgres exited at start:\n%s", log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not take connections within 30s: %v", err)
		}
	}
}

// stop shuts the server down fast (SIGINT: connections are cut, running
// transactions rolled back) and waits until it has exited.
func (p *postgres) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.cmd = nil
}

// close stops the server and removes its directory.
func (p *postgres) close() {
	p.stop()
	_ = os.RemoveAll(p.dir)
}

// url returns the URL of database db.
func (p *postgres) url(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", dbUser, p.port, db)
}

// createDatabase makes a new database and returns its URL.
func (p *postgres) createDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, p.url("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return p.url(name), nil
}

// redisServer is a redis-server (or redis-sentinel) of the suite's own,
// kept in memory only.
type redisServer struct {
	port     int
	password string
	cmd      *exec.Cmd
	exited   chan struct{}
	client   *redis.Client
}

func startRedis(dir string) (*redisServer, error) {
	return startRedisServer(dir, "redis", "")
}

// startRedisServer starts a redis-server on a free port, logging to
// <name>.log in dir, requiring password (if not empty; also to replicate
// from its master) and with the extra arguments extra (--replicaof ...).
func startRedisServer(dir, name, password string, extra ...string) (*redisServer, error) {
	return launchRedis(dir, name, "redis-server", password, func(port string) []string {
		argv := []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}
		if password != "" {
			argv = append(argv, "--requirepass", password, "--masterauth", password)
		}
		return append(argv, extra...)
	})
}

// launchRedis runs bin (redis-server or redis-sentinel) with the arguments
// args gives for a free port, and waits until it answers a PING (with
// password, if not empty).
func launchRedis(dir, name, bin, password string, args func(port string) []string) (*redisServer, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("no %s on PATH: install it (Debian: apt-get install %s)", bin, bin)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	r := &redisServer{password: password}
	r.port, _ = strconv.Atoi(port)
	cmd := exec.Command(path, args(port)...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	r.cmd, r.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(r.exited) }()
	r.client = redis.NewClient(&redis.Options{Addr: addr, Password: password})
	deadline := time.Now().Add(10 * time.Second)
	for r.client.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			r.close()
			return nil, fmt.Errorf("%s (%s) did not answer within 10s", name, bin)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return r, nil
}

func (r *redisServer) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

// addr is the server's host:port.
func (r *redisServer) addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

func (r *redisServer) close() {
	_ = r.client.Close()
	_ = r.cmd.Process.Kill()
	<-r.exited
}

// freeAddr returns a free TCP address on 127.0.0.1 that the suite has not
// handed out before.
func freeAddr() (string, error) { return suiteAddrs.Next() }

// suiteAddrs are the addresses the suite handed out.
var suiteAddrs freeaddr.Book
