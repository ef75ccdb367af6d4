package worker

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// What a worker host gives each running turn, for PRCHAT_CONCURRENCY's
// default. A turn's agent CLI is three orders of magnitude above prchat's
// own ~100 KB per turn: prchat-bench's clis phase read Claude Code's
// process tree at 178-182 MB and Codex's at 137 MB while waiting on their
// model (README, Capacity), so a turn gets 256 MiB with room for its tools
// (git, rg), and the host keeps 1 GiB for itself and prchat. A waiting CLI
// costs little CPU (Claude Code 2-3% of a core, Codex nothing), but a
// start costs up to 2 s of a core: at most 8 turns per core, and 64 in all.
const (
	memoryPerTurn     = 256 << 20
	memoryReserved    = 1 << 30
	turnsPerCore      = 8
	maxDefaultTurns   = 64
	defaultTurnsNoMem = 4 // when the host's memory cannot be read
)

// DefaultConcurrency is how many turns a worker on this host runs at once
// unless told (PRCHAT_CONCURRENCY's default): from the host's memory and
// cores.
func DefaultConcurrency() int {
	return concurrencyFor(hostMemory(), runtime.NumCPU())
}

// concurrencyFor is the default concurrency of a host with memory bytes
// (0: unknown) and cores.
func concurrencyFor(memory uint64, cores int) int {
	if memory == 0 {
		return defaultTurnsNoMem
	}
	n := 1
	if memory > memoryReserved {
		n = max(1, int((memory-memoryReserved)/memoryPerTurn))
	}
	return min(n, turnsPerCore*max(cores, 1), maxDefaultTurns)
}

// hostMemory is the memory this process may use: the host's (MemTotal of
// /proc/meminfo), or its cgroup's limit when lower (a container's). 0 when
// neither can be read (not Linux).
func hostMemory() uint64 {
	total := memTotal()
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		limit, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64) // "max": no limit
		if err == nil && limit > 0 && (total == 0 || limit < total) {
			total = limit
		}
		break
	}
	return total
}

func memTotal() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest) // "24626124 kB"
		if len(fields) == 2 && fields[1] == "kB" {
			kb, err := strconv.ParseUint(fields[0], 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
