package main

import (
	"math"
	"testing"
)

// TestFlatness finds the change from one worker's figure largest in size,
// either way, and refuses to compare with a figure missing.
func TestFlatness(t *testing.T) {
	t.Parallel()
	ops := map[int]drainOps{
		1: {redis: 24, xacts: 2},
		2: {redis: 24.5, xacts: 1.9},
		4: {redis: 25, xacts: 2.05},
		8: {redis: 27, xacts: 1.7},
	}
	redis := func(o drainOps) float64 { return o.redis }
	value, worst, ok := flatness(drainCounts, ops, ops[1].redis, redis)
	if !ok || value != "24.00 / 24.50 / 25.00 / 27.00" || math.Abs(worst-0.125) > 1e-9 {
		t.Errorf("redis: %q, %v, %v; want the four figures and +12.5%%", value, worst, ok)
	}
	xacts := func(o drainOps) float64 { return o.xacts }
	if _, worst, ok := flatness(drainCounts, ops, ops[1].xacts, xacts); !ok || math.Abs(worst+0.15) > 1e-9 {
		t.Errorf("xacts: %v, %v; want -15%%", worst, ok)
	}
	delete(ops, 4)
	if _, _, ok := flatness(drainCounts, ops, 24, redis); ok {
		t.Error("compared with the figure of 4 workers missing")
	}
	ops[4] = drainOps{redis: 25, xacts: -1}
	if _, _, ok := flatness(drainCounts, ops, 2, xacts); ok {
		t.Error("compared with an unknown count of transactions")
	}
}
