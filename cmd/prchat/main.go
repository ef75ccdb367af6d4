// Command prchat is the prchat daemon and its command-line tools.
//
//	prchat serve     API, worker and reconciler in one process (embedded
//	                 SQLite and Redis unless their URLs are set)
//	prchat api       the HTTP API alone
//	prchat worker    a worker (and reconciler) alone
//	prchat migrate   apply the database migrations
//	prchat ask       ask a question and stream the answer (a client)
//	prchat review    record a review from your own agent session (a client)
//	prchat bench     measure the daemon against the floor its parts allow
//
// Every setting is a PRCHAT_* environment variable and a flag; see
// `prchat serve --help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `Usage: prchat <command> [flags]

Commands:
  serve     run the API, a worker and the reconciler in one process
  api       run the HTTP API
  worker    run a worker and the reconciler
  migrate   apply the database migrations
  ask       ask a question about a pull request's review and print the answer
  review    record a review version from an agent session you ran yourself
  bench     measure intake, overhead, throughput, memory and live events

Run 'prchat <command> --help' for the settings of a command.
`

// Main runs the command in args and returns the process's exit code.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "serve", "api", "worker":
		err = runDaemon(ctx, cmd, rest, getenv, stderr)
	case "migrate":
		err = runMigrate(ctx, rest, getenv, stderr)
	case "ask":
		err = runAsk(ctx, rest, getenv, stdout, stderr)
	case "bench":
		err = runBench(ctx, rest, getenv, stdout, stderr)
	case "review":
		err = runReview(ctx, rest, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "prchat: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	var usage usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "prchat %s: %v\n", cmd, err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "prchat %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// runDaemon runs serve, api or worker until ctx ends.
func runDaemon(ctx context.Context, cmd string, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := loadConfig(cmd, args, getenv, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	opts := options{logger: log}
	if getenv("PRCHAT_BENCH_AGENT") == "1" {
		opts.backends = append(opts.backends, &benchAgent{})
	}
	d, err := start(ctx, cfg, roleOf(cmd), opts)
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "prchat started", "command", cmd, "listen", d.Addr(), "worker", cfg.WorkerID)
	select {
	case <-ctx.Done():
	case err = <-d.Failed():
	}
	d.Stop()
	log.InfoContext(context.WithoutCancel(ctx), "prchat stopped", "command", cmd)
	return err
}

func runMigrate(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	cfg, err := loadConfig("migrate", args, getenv, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	log.InfoContext(ctx, "migrations applied")
	return nil
}
