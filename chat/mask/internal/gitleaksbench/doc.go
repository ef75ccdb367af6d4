// Package gitleaksbench compares prchat's secret masker with gitleaks'
// default detector (v8.30.1). It is a separate module so that gitleaks never
// enters prchat's own dependencies.
//
// The corpus is gitleaks' own: the test builds gitleaks' config generator
// (cmd/generate/config) from a copy of its module in which
// utils/validate.go is replaced by testdata/validate.go, which records each
// rule's true- and false-positive examples instead of checking them, and
// secrets/regen.go by testdata/regen.go, which draws gitleaks' sample
// secrets from a seeded generator so that every run compares on the same
// corpus (GITLEAKSBENCH_SEED=N picks another draw, =random a fresh one). The
// generator's output must equal the shipped config/gitleaks.toml. TestCompare
// prints recall, partial masks, documented harmless strings changed and MB/s
// for both, and fails when prchat's recall is under 99%, when any secret is
// partly masked, or when prchat changes more harmless strings than gitleaks
// flags. Run it from this directory:
//
//	go test -count=1 -v .
//	go test -run XXX -bench . -benchtime 3x
package gitleaksbench
