//go:build !prchatbench

package main

import "github.com/prchat/prchat/chat"

// buildBackends are the backends this build adds to the built-in ones: none
// in a production build (a prchatbench build adds the bench's agent, see
// backends_bench.go).
func buildBackends() []chat.Backend { return nil }
