package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
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
	var usage usageError
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

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// parseArgs reads the bench's flags (no environment variable: see Run).
// Asked for help, it prints the usage to help and returns flag.ErrHelp.
func parseArgs(args []string, help io.Writer) (Config, error) {
	var cfg Config
	fs := flag.NewFlagSet("prchat-bench", flag.ContinueOnError)
	cfg.AddFlags(fs)
	daemon := fs.String("prchat", "", "the prchat program to bench, built with -tags prchatbench (default: prchat-benchd beside this program)")
	var out bytes.Buffer
	fs.SetOutput(&out)
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		_, _ = help.Write(out.Bytes())
		return cfg, err
	case err != nil:
		return cfg, usageError{err.Error()}
	case fs.NArg() > 0:
		return cfg, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if err := cfg.Check(); err != nil {
		return cfg, usageError{err.Error()}
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
