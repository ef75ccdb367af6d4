package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/prchat/prchat/cmd/internal/cliflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Main runs the bench of the command line args and returns the process's
// exit code: 0 when it ran, 2 for a mistake in args, 1 when it failed.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseArgs(args, stdout)
	if err == nil {
		err = Run(ctx, cfg, stdout, stderr)
	}
	var usage cliflag.UsageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "prchat-bench: %v (see --help)\n", err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "prchat-bench: %v\n", err)
		return 1
	}
	return 0
}

// parseArgs reads the bench's flags (no environment variable: see Run).
// Asked for help, it prints the usage to help and returns flag.ErrHelp.
func parseArgs(args []string, help io.Writer) (Config, error) {
	var cfg Config
	fs := flag.NewFlagSet("prchat-bench", flag.ContinueOnError)
	cfg.AddFlags(fs)
	daemon := fs.String("prchat", "", "the prchat program to bench, built with -tags prchatbench (default: prchat-benchd beside this program)")
	if err := cliflag.Parse(fs, args, help); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, cliflag.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if err := cfg.Check(); err != nil {
		return cfg, cliflag.UsageError{Msg: err.Error()}
	}
	if *daemon == "" {
		exe, err := os.Executable()
		if err != nil {
			return cfg, fmt.Errorf("find this program: %w", err)
		}
		*daemon = filepath.Join(filepath.Dir(exe), "prchat-benchd")
	}
	cfg.Command = []string{*daemon}
	return cfg, nil
}
