//go:build prchatbench

package main

import (
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/cmd/prchat-bench/benchagent"
)

// buildBackends are the backends this build adds to the built-in ones: the
// zero-latency agent of prchat-bench, as backend "bench". Only a binary
// built with -tags prchatbench, the daemon prchat-bench drives, has it.
func buildBackends() []chat.Backend { return []chat.Backend{&benchagent.Agent{}} }
