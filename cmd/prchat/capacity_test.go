package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prchat/prchat/worker"
)

func TestHelpSaysWhereTheConcurrencyComesFrom(t *testing.T) {
	t.Parallel()
	for _, s := range settings() {
		if s.env != "PRCHAT_CONCURRENCY" {
			continue
		}
		if s.def != fmt.Sprint(worker.DefaultConcurrency()) || !strings.Contains(s.help, "memory") {
			t.Errorf("PRCHAT_CONCURRENCY: default %q, help %q; want the host's figure and where it comes from", s.def, s.help)
		}
		return
	}
	t.Fatal("no PRCHAT_CONCURRENCY setting")
}
