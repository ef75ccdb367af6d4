// Package gitleaksbench compares prchat's secret masker with gitleaks'
// default detector on the same generated input. It is a separate module so
// that gitleaks never enters prchat's own dependencies; run it from this
// directory with
//
//	go test -run XXX -bench . -benchtime 1x
package gitleaksbench
