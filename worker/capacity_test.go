package worker

import "testing"

func TestConcurrencyFromMemory(t *testing.T) {
	t.Parallel()
	const gib = 1 << 30
	for _, tc := range []struct {
		memory uint64
		cores  int
		want   int
	}{
		{0, 4, 4},           // memory unknown: the old default
		{512 << 20, 2, 1},   // less than the reserve: one turn
		{2 * gib, 1, 4},     // 1 GiB left: 4 turns of 256 MiB
		{4 * gib, 2, 12},    // 3 GiB left
		{8 * gib, 1, 8},     // bounded by 8 per core
		{24 * gib, 2, 16},   // this kind of VM: by its cores
		{256 * gib, 64, 64}, // at most 64
	} {
		if got := concurrencyFor(tc.memory, tc.cores); got != tc.want {
			t.Errorf("%d MiB, %d cores: concurrency %d, want %d", tc.memory>>20, tc.cores, got, tc.want)
		}
	}
	if m := hostMemory(); m > 0 {
		t.Logf("this host: %d MiB, default concurrency %d", m>>20, DefaultConcurrency())
	}
}
