package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// processRSS returns the resident set size of process pid (VmRSS).
func processRSS(pid int) (int64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, fmt.Errorf("read RSS of process %d: %w", pid, err)
	}
	st, err := p.NewStatus()
	if err != nil {
		return 0, fmt.Errorf("read RSS of process %d: %w", pid, err)
	}
	return int64(st.VmRSS), nil
}

// processCPU returns the CPU time (user + system) process pid has used.
func processCPU(pid int) (time.Duration, error) {
	st, err := procStat(pid)
	if err != nil {
		return 0, fmt.Errorf("read CPU time of process %d: %w", pid, err)
	}
	return time.Duration(st.CPUTime() * float64(time.Second)), nil
}

// processCPUFine returns the CPU time the threads of process pid have
// used, to the nanosecond (their schedstat; a thread that exited is not
// counted), where processCPU counts in clock ticks (10 ms): for the small
// figures of an idle daemon.
func processCPUFine(pid int) (time.Duration, error) {
	threads, err := procfs.AllThreads(pid)
	if err != nil {
		return 0, fmt.Errorf("read CPU time of process %d: %w", pid, err)
	}
	var sum time.Duration
	for _, t := range threads {
		st, err := t.Schedstat()
		if err != nil {
			continue // exited meanwhile
		}
		sum += time.Duration(st.RunningNanoseconds)
	}
	return sum, nil
}

// processSwitches returns the context switches the threads of process
// pid have made (their /proc status; a thread that exited is not counted).
func processSwitches(pid int) (switches, error) {
	threads, err := procfs.AllThreads(pid)
	if err != nil {
		return unknownSwitches, fmt.Errorf("read context switches of process %d: %w", pid, err)
	}
	var sum switches
	for _, t := range threads {
		st, err := t.NewStatus()
		if err != nil {
			continue // exited meanwhile
		}
		sum.slept += int64(st.VoluntaryCtxtSwitches)
		sum.preempted += int64(st.NonVoluntaryCtxtSwitches)
	}
	return sum, nil
}

// processNamed reports whether the command name of process pid starts
// with name.
func processNamed(pid int, name string) bool {
	st, err := procStat(pid)
	return err == nil && strings.HasPrefix(st.Comm, name)
}

// machineCPU returns the CPU time of the machine, summed over its cores:
// busy (all but idle and iowait) and all; -1 when unknown.
func machineCPU() (busy, all time.Duration) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return -1, -1
	}
	st, err := fs.Stat()
	if err != nil {
		return -1, -1
	}
	c := st.CPUTotal
	idle := c.Idle + c.Iowait
	total := idle + c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
	return seconds(total - idle), seconds(total)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// machineSwitches returns the context switches the machine's CPUs have
// made since boot, or -1.
func machineSwitches() int64 {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return -1
	}
	st, err := fs.Stat()
	if err != nil {
		return -1
	}
	return int64(st.ContextSwitches)
}

// procStat reads /proc/pid/stat.
func procStat(pid int) (procfs.ProcStat, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return procfs.ProcStat{}, err
	}
	return p.Stat()
}

// postmasterOf returns the postmaster of the Postgres backend process pid:
// its parent, if both are postgres processes of this machine.
func postmasterOf(pid int) (int, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, fmt.Errorf("backend process %d is not on this machine", pid)
	}
	st, err := p.Stat()
	if err != nil {
		return 0, fmt.Errorf("backend process %d: %w", pid, err)
	}
	pp, err := procfs.NewProc(st.PPID)
	if err != nil {
		return 0, fmt.Errorf("parent of backend process %d: %w", pid, err)
	}
	pst, err := pp.Stat()
	if err != nil {
		return 0, fmt.Errorf("parent of backend process %d: %w", pid, err)
	}
	if st.Comm != "postgres" || pst.Comm != "postgres" {
		return 0, fmt.Errorf("process %d (%s) and its parent (%s) are not a Postgres server of this machine", pid, st.Comm, pst.Comm)
	}
	return st.PPID, nil
}

// processTreeCPU returns the CPU time of process pid and its children: its
// own, its live children's and that of the children it has waited for.
func processTreeCPU(pid int) (time.Duration, error) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	var total float64
	found := false
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue // it exited meanwhile
		}
		switch {
		case st.PID == pid:
			found = true
			total += st.CPUTime() + float64(st.CUTime+st.CSTime)/userHZ
		case st.PPID == pid:
			total += st.CPUTime()
		}
	}
	if !found {
		return 0, fmt.Errorf("process %d is gone", pid)
	}
	return seconds(total), nil
}

// userHZ is the unit of the CPU times in /proc/<pid>/stat.
const userHZ = 100

// loadAverage returns the one-minute load average, or "" when unknown.
func loadAverage() string {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return ""
	}
	l, err := fs.LoadAvg()
	if err != nil {
		return ""
	}
	return strconv.FormatFloat(l.Load1, 'f', 2, 64)
}

// dieWithParent makes the daemon under test get SIGKILL if the bench dies
// without stopping it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// processTree is a process and its descendants, as read once from /proc.
type processTree struct {
	pid int
	rss int64         // the tree's summed resident set sizes
	cpu time.Duration // the tree's summed CPU time (its live threads' schedstat)
}

// childTrees returns the trees of the child processes of parent whose
// program is exe (a resolved path; "" takes every child).
func childTrees(parent int, exe string) ([]processTree, error) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	type info struct {
		ppid int
		rss  int64
		cpu  float64
	}
	all := map[int]info{}
	kids := map[int][]int{}
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue // it exited meanwhile
		}
		all[p.PID] = info{st.PPID, int64(st.ResidentMemory()), st.CPUTime()}
		kids[st.PPID] = append(kids[st.PPID], p.PID)
	}
	var out []processTree
	for _, child := range kids[parent] {
		if exe != "" {
			p, err := procfs.NewProc(child)
			if err != nil {
				continue
			}
			if path, err := p.Executable(); err != nil || path != exe {
				continue
			}
		}
		t := processTree{pid: child}
		for todo := []int{child}; len(todo) > 0; {
			pid := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			t.rss += all[pid].rss
			if fine, err := processCPUFine(pid); err == nil {
				t.cpu += fine
			} else {
				t.cpu += seconds(all[pid].cpu)
			}
			todo = append(todo, kids[pid]...)
		}
		out = append(out, t)
	}
	return out, nil
}

// waitedCPU returns the CPU time of the children process pid has waited
// for (cutime + cstime): an agent CLI's whole run once it ended.
func waitedCPU(pid int) (time.Duration, error) {
	st, err := procStat(pid)
	if err != nil {
		return 0, fmt.Errorf("read CPU time of process %d: %w", pid, err)
	}
	return seconds(float64(st.CUTime+st.CSTime) / userHZ), nil
}

// memoryPages describes how this machine maps memory in pages, or "" when
// unknown: the mode of transparent huge pages and the huge pages reserved.
// Both change what a switch between processes costs (the TLB entries a
// process must refill), part of what grows when many processes share few
// cores.
func memoryPages() string {
	thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled") // unknown: left out
	var total, free, rsvd, size *uint64
	if fs, err := procfs.NewDefaultFS(); err == nil {
		if mi, err := fs.Meminfo(); err == nil {
			total, free, rsvd, size = mi.HugePagesTotal, mi.HugePagesFree, mi.HugePagesRsvd, mi.Hugepagesize
		}
	}
	return describePages(string(thp), total, free, rsvd, size)
}
