package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// startDaemon reads the settings of a serve, api or worker command line
// and starts its daemon.
func startDaemon(ctx context.Context, cmd string, args []string, getenv func(string) string, help, logs io.Writer) (*daemon, Config, *slog.Logger, error) {
	cfg, err := loadConfig(cmd, args, getenv, help)
	if err != nil {
		return nil, cfg, nil, err
	}
	log, err := newLogger(cfg, logs)
	if err != nil {
		return nil, cfg, nil, err
	}
	lock, err := lockDataDir(cfg, cmd)
	if err != nil {
		return nil, cfg, log, err
	}
	d, err := start(ctx, cfg, roleOf(cmd), options{logger: log, backends: buildBackends()})
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		return nil, cfg, log, err
	}
	d.lock = lock
	return d, cfg, log, nil
}

// runDaemon runs serve, api or worker until ctx ends.
func runDaemon(ctx context.Context, cmd string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	d, cfg, log, err := startDaemon(ctx, cmd, args, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	if cfg.CPUProfile != "" {
		stopProfile, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			d.Stop()
			return err
		}
		defer stopProfile()
	}
	attrs := []any{"command", cmd, "listen", d.Addr(), "data_dir", cfg.DataDir, "worker", cfg.WorkerID}
	if cmd != "worker" {
		attrs = append(attrs, "dashboard", d.URL()+"/")
	}
	log.InfoContext(ctx, "prchat started", append(attrs, "stop", "Ctrl+C or SIGTERM (twice: running turns handed on at once)")...)
	select {
	case <-ctx.Done():
	case err = <-d.Failed():
	}
	// A second signal while the worker's grace runs hands its turns on at
	// once.
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-again:
			log.InfoContext(context.WithoutCancel(ctx), "second signal: handing running turns on now")
			d.Hurry()
		case <-stopped:
		}
	}()
	d.Stop()
	log.InfoContext(context.WithoutCancel(ctx), "prchat stopped", "command", cmd)
	return err
}

// startCPUProfile starts a CPU profile written to file, and returns the
// function that ends it.
func startCPUProfile(file string) (func(), error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig("migrate", args, getenv, stdout)
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
