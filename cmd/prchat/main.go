// Command prchat is the prchat daemon and its command-line tools.
//
//	prchat serve     API, worker and reconciler in one process (embedded
//	                 SQLite and Redis unless their URLs are set)
//	prchat api       the HTTP API alone
//	prchat worker    a worker (and reconciler) alone
//	prchat migrate   apply the database migrations
//	prchat ask       ask a question and stream the answer (a client)
//	prchat review    record a review from your own agent session (a client)
//	prchat token     make, list and revoke API tokens (on the database)
//
// The bench is a command of its own, cmd/prchat-bench.
//
// Every setting is a PRCHAT_* environment variable and a flag; see
// `prchat serve --help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/prchat/prchat/cmd/internal/cliflag"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/prchat/prchat/cmd/prchat/client"
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
  token     make, list and revoke API tokens
  version   print the version, VCS revision and Go version of this binary

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
		err = runDaemon(ctx, cmd, rest, getenv, stdout, stderr)
	case "migrate":
		err = runMigrate(ctx, rest, getenv, stdout, stderr)
	case "ask":
		err = client.Ask(ctx, rest, getenv, stdout, stderr)
	case "review":
		err = client.Review(ctx, rest, getenv, stdout, stderr)
	case "token":
		err = runToken(ctx, rest, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version", "--version", "-version":
		printVersion(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "prchat: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	var usage cliflag.UsageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "prchat %s: %v (see --help)\n", cmd, err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "prchat %s: %v\n", cmd, err)
		return 1
	}
	return 0
}
