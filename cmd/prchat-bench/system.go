package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// usage is what the bench reads, at one moment, of what shares the machine
// with the daemons under test: the machine's CPU, the Redis and Postgres
// servers, and the bench's own process. A figure that cannot be read is
// negative (nil for the maps).
type usage struct {
	// busy and all are the machine's CPU time, summed over its cores: busy
	// is all but idle and iowait.
	busy, all time.Duration
	bench     time.Duration // the bench's own process
	redisCPU  time.Duration // the Redis server process (INFO cpu)
	// redisCalls counts the calls of each Redis command (INFO
	// commandstats), the calls a script makes included.
	redisCalls map[string]int64
	// redisReads counts the reads of client connections the Redis server
	// processed (INFO stats total_reads_processed): its round trips, a
	// pipeline being one.
	redisReads int64
	// switches counts the context switches of the machine's CPUs
	// (/proc/stat ctxt), whoever made them.
	switches int64
	// daemonSwitches, pgSwitches and redisSwitches are the context
	// switches of the daemons sampled, of their Postgres backends and of
	// the Redis server, by whether each slept or was preempted: who pays
	// for the switching the machine's count shows.
	daemonSwitches, pgSwitches, redisSwitches switches

	pgCPU time.Duration // the Postgres server: the postmaster and its children
	// pgBackends is the CPU the backends of the daemons' connections
	// have used (their application_name is the bench's): the server's
	// share of the daemons' work without the other databases', where
	// other clients share the server.
	pgBackends time.Duration
	pgXacts    int64 // transactions of the bench's database (pg_stat_database)
	// pgXids is the server's next transaction id: the difference of two
	// samples counts the transactions that wrote, on the whole server,
	// exactly (pg_stat_database's counts arrive up to a second late, and
	// the bench's own reads assign no id).
	pgXids  int64
	pgStmts int64 // statements run in it (pg_stat_statements)
	// pgSyncs counts the server's flushes of its WAL to disk (pg_stat_wal
	// wal_sync), every database's: a commit that waits for the disk
	// makes one unless another's flush carried it.
	pgSyncs int64
	// pgWALBytes and pgFPIs are the WAL the server wrote and the full page
	// images in it (pg_stat_wal): after each checkpoint, a page's first
	// change writes the whole page, so a window with a checkpoint in it
	// costs more.
	pgWALBytes, pgFPIs int64
	// pgBlocks counts the buffer accesses (blocks found in shared buffers
	// or read) of the daemons' schema: its tables, their indexes and
	// TOAST (pg_statio_all_tables), whoever made them. It measures the
	// work the server did for the turns, as the statements do, where its
	// CPU measures what that work cost on the machine at the time.
	pgBlocks int64
	// pgCalls counts the calls of each statement run in it, by the start
	// of its text (pg_stat_statements), the bench's own included.
	pgCalls map[string]int64
	// own is how many statements the bench had run on the daemons'
	// database (bencher.ownQueries) when the sample began.
	own int64
}

// perfState is what the throughput phase keeps between its topologies.
type perfState struct {
	// postmaster is the local Postgres server's process (0 not looked for
	// yet, -1 not found: postmasterWhy says why); pgStatements is the
	// pg_stat_statements view, qualified by its schema ("" if it cannot be
	// read).
	postmaster    int
	postmasterWhy string
	pgStatements  string
	// redisServer is the Redis server's process when it runs on this
	// machine (0 not looked for yet, -1 not found).
	redisServer int
	// turnsPerSecond are the throughput of each topology measured so far,
	// by label, and queueFloor asynq's own (0 until measured).
	turnsPerSecond map[string]float64
	queueFloor     float64
	// drainTotals are the operations of each count of workers draining
	// alone, summed over the rounds.
	drainTotals map[int]*drainTotal
}

// sample reads the usage now, with the context switches of daemons.
func (b *bencher) sample(ctx context.Context, daemons ...*benchDaemon) usage {
	u := usage{busy: -1, all: -1, bench: -1, redisCPU: -1, redisReads: -1, pgCPU: -1, pgBackends: -1, pgXacts: -1, pgXids: -1, pgStmts: -1, pgSyncs: -1, pgWALBytes: -1, pgFPIs: -1, pgBlocks: -1, own: b.ownQueries.Load(),
		daemonSwitches: unknownSwitches, pgSwitches: unknownSwitches, redisSwitches: unknownSwitches}
	u.busy, u.all = machineCPU()
	u.switches = machineSwitches()
	if len(daemons) > 0 {
		u.daemonSwitches = switches{}
		for _, d := range daemons {
			s, err := processSwitches(d.cmd.Process.Pid)
			if err != nil {
				u.daemonSwitches = unknownSwitches
				break
			}
			u.daemonSwitches = u.daemonSwitches.plus(s)
		}
	}
	if c, err := processCPU(os.Getpid()); err == nil {
		u.bench = c
	}
	if b.rdb != nil {
		if info, err := b.rdb.Info(ctx, "cpu").Result(); err == nil {
			u.redisCPU = redisCPU(info)
		}
		if info, err := b.rdb.Info(ctx, "commandstats").Result(); err == nil {
			u.redisCalls = redisCalls(info)
		}
		if info, err := b.rdb.Info(ctx, "stats").Result(); err == nil {
			if n, err := strconv.ParseInt(infoFields(info)["total_reads_processed"], 10, 64); err == nil {
				u.redisReads = n
			}
		}
		if b.perf.redisServer == 0 {
			b.perf.redisServer = b.findRedisServer(ctx)
		}
		if b.perf.redisServer > 0 {
			if s, err := processSwitches(b.perf.redisServer); err == nil {
				u.redisSwitches = s
			}
		}
	}
	if b.pg != nil {
		if b.perf.postmaster == 0 {
			b.perf.postmaster, b.perf.postmasterWhy = b.findPostmaster(ctx)
		}
		if b.perf.postmaster > 0 {
			if c, err := processTreeCPU(b.perf.postmaster); err == nil {
				u.pgCPU = c
			}
			u.pgBackends, u.pgSwitches = b.daemonBackends(ctx)
		}
		var xacts int64
		b.ownQueries.Add(1)
		if b.pg.QueryRowContext(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&xacts) == nil {
			u.pgXacts = xacts
		}
		var xids int64
		b.ownQueries.Add(1)
		if b.pg.QueryRowContext(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&xids) == nil {
			u.pgXids = xids
		}
		var syncs, bytes, fpis int64
		b.ownQueries.Add(1)
		if b.pg.QueryRowContext(ctx, `SELECT wal_sync, wal_bytes::bigint, wal_fpi FROM pg_stat_wal`).Scan(&syncs, &bytes, &fpis) == nil {
			u.pgSyncs, u.pgWALBytes, u.pgFPIs = syncs, bytes, fpis
		}
		var blocks int64
		b.ownQueries.Add(1)
		if b.pg.QueryRowContext(ctx, `SELECT coalesce(sum(
			coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0) + coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0) +
			coalesce(toast_blks_hit, 0) + coalesce(toast_blks_read, 0) + coalesce(tidx_blks_hit, 0) + coalesce(tidx_blks_read, 0)), 0)::bigint
			FROM pg_statio_all_tables WHERE schemaname = $1`, b.daemonApp).Scan(&blocks) == nil {
			u.pgBlocks = blocks
		}
		if b.perf.pgStatements != "" {
			var calls int64
			b.ownQueries.Add(1)
			if b.pg.QueryRowContext(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM `+b.perf.pgStatements+` WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).
				Scan(&calls) == nil {
				u.pgStmts = calls
			}
			u.pgCalls = b.statementCalls(ctx)
		}
	}
	return u
}

// statementLabel is how much of a statement's text names it in the
// statements per turn.
const statementLabel = 56

// statementCalls returns the calls of each statement of the bench's
// database by the start of its text, or nil.
func (b *bencher) statementCalls(ctx context.Context) map[string]int64 {
	b.ownQueries.Add(1)
	rows, err := b.pg.QueryContext(ctx, `SELECT left(regexp_replace(query, '\s+', ' ', 'g'), $1), calls FROM `+b.perf.pgStatements+
		` WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`, statementLabel)
	if err != nil {
		return nil
	}
	defer rows.Close()
	calls := map[string]int64{}
	for rows.Next() {
		var label string
		var n int64
		if err := rows.Scan(&label, &n); err != nil {
			return nil
		}
		calls[label] += n
	}
	if rows.Err() != nil {
		return nil
	}
	return calls
}

// daemonBackends returns the CPU time the live Postgres backends of the
// daemons' connections have used and the context switches they made, or
// -1 and unknownSwitches when they cannot be read.
func (b *bencher) daemonBackends(ctx context.Context) (time.Duration, switches) {
	b.ownQueries.Add(1)
	rows, err := b.pg.QueryContext(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, b.daemonApp)
	if err != nil {
		return -1, unknownSwitches
	}
	defer rows.Close()
	var cpu time.Duration
	var sw switches
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return -1, unknownSwitches
		}
		if c, err := processCPUFine(pid); err == nil {
			cpu += c
		}
		if s, err := processSwitches(pid); err == nil {
			sw = sw.plus(s)
		}
	}
	if rows.Err() != nil {
		return -1, unknownSwitches
	}
	return cpu, sw
}

// findRedisServer returns the process of the Redis server the bench's
// Redis URL names if it runs on this machine, or -1.
func (b *bencher) findRedisServer(ctx context.Context) int {
	if b.cfg.RedisURL == "" || !loopbackURL(b.cfg.RedisURL) {
		return -1
	}
	info, err := b.rdb.Info(ctx, "server").Result()
	if err != nil {
		return -1
	}
	pid, err := strconv.Atoi(infoFields(info)["process_id"])
	if err != nil || !processNamed(pid, "redis") {
		return -1
	}
	return pid
}

// findPostmaster returns the process id of the Postgres server the bench's
// database is on if it runs on this machine (the postmaster, the parent of
// the bench's own backend), or -1 and why not. It also finds out whether
// pg_stat_statements can be read.
func (b *bencher) findPostmaster(ctx context.Context) (int, string) {
	// The view is in the extension's schema, which the search path of the
	// bench's own schema leaves out.
	var schema string
	if b.pg.QueryRowContext(ctx, `SELECT quote_ident(extnamespace::regnamespace::text) FROM pg_extension WHERE extname = 'pg_stat_statements'`).Scan(&schema) == nil {
		b.perf.pgStatements = schema + ".pg_stat_statements"
		var track string
		if b.pg.QueryRowContext(ctx, `SELECT current_setting('pg_stat_statements.track', true)`).Scan(&track) == nil && track != "all" {
			// Foreign-key checks and triggers run statements of their own.
			b.rep.note("Postgres statements: pg_stat_statements.track is " + cmp.Or(track, "unknown") +
				", so the statements run inside others (foreign-key checks, triggers) are not counted; set it to all to count them")
		}
	}
	if !loopbackURL(b.cfg.DatabaseURL) {
		return -1, "the server is not on this machine"
	}
	var pid int
	if err := b.pg.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return -1, fmt.Sprintf("pg_backend_pid: %v", err)
	}
	pm, err := postmasterOf(pid)
	if err != nil {
		return -1, err.Error()
	}
	return pm, ""
}

// loopbackURL reports whether a database URL names a server on this
// machine (a loopback address, localhost or a Unix socket).
func loopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "" {
		host = u.Query().Get("host")
	}
	if host == "" || host == "localhost" || strings.HasPrefix(host, "/") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// infoFields returns the name:value lines of a Redis INFO reply.
func infoFields(info string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// redisCPU returns the CPU time of the Redis server process (user +
// system) of an INFO cpu reply, or -1.
func redisCPU(info string) time.Duration {
	f := infoFields(info)
	sys, err1 := strconv.ParseFloat(f["used_cpu_sys"], 64)
	user, err2 := strconv.ParseFloat(f["used_cpu_user"], 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration((sys + user) * float64(time.Second))
}

// redisCalls returns the calls of each command of an INFO commandstats
// reply (cmdstat_<name>:calls=<n>,usec=...).
func redisCalls(info string) map[string]int64 {
	out := map[string]int64{}
	for k, v := range infoFields(info) {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(v, ",") {
			if n, ok := strings.CutPrefix(kv, "calls="); ok {
				if calls, err := strconv.ParseInt(n, 10, 64); err == nil {
					out[name] = calls
				}
			}
		}
	}
	return out
}

// perTurn formats d/turns, or n/a when either end of the window is unknown.
func perTurn(from, until time.Duration, turns int64) string {
	if from < 0 || until < 0 || turns <= 0 {
		return "n/a"
	}
	return ms((until - from) / time.Duration(turns))
}

// commandsPerTurn formats the Redis commands per turn between two counts:
// the total, then the top commands by calls.
func commandsPerTurn(from, until map[string]int64, turns int64, top int) string {
	return callsPerTurn(from, until, turns, top, strings.ToLower, ", ")
}

// callsPerTurn formats the calls per turn between two counts by name: the
// total, then the top names by calls, each as label gives it, joined
// with sep.
func callsPerTurn(from, until map[string]int64, turns int64, top int, label func(string) string, sep string) string {
	if from == nil || until == nil || turns <= 0 {
		return "n/a"
	}
	delta := callDeltas(from, until)
	var sum int64
	for _, d := range delta {
		sum += d
	}
	names := slices.SortedFunc(maps.Keys(delta), func(a, b string) int {
		return cmp.Or(cmp.Compare(delta[b], delta[a]), cmp.Compare(a, b))
	})
	per := func(n int64) string { return strconv.FormatFloat(float64(n)/float64(turns), 'f', 2, 64) }
	parts := make([]string, 0, top)
	for _, name := range names[:min(top, len(names))] {
		parts = append(parts, label(name)+" "+per(delta[name]))
	}
	return per(sum) + ": " + strings.Join(parts, sep)
}

// countPerTurn formats a count's change per turn, less the bench's own
// (own), or n/a.
func countPerTurn(from, until, own, turns int64) string {
	if from < 0 || until < 0 || turns <= 0 {
		return "n/a"
	}
	return strconv.FormatFloat(float64(max(until-from-own, 0))/float64(turns), 'f', 2, 64)
}

// addUsage adds the rows of what the machine, Redis, Postgres and the
// bench did between two samples, over turns turns (or tasks: unit), to
// section. daemons is the CPU the daemons under test used meanwhile.
func (b *bencher) addUsage(section, unit string, from, until usage, turns int64, daemons time.Duration) {
	if turns <= 0 {
		return
	}
	redis, pg := "n/a (in-process, in the serve daemon's figure)", "n/a (embedded SQLite)"
	if b.rdb != nil {
		redis = perTurn(from.redisCPU, until.redisCPU, turns)
	}
	if b.cfg.DatabaseURL != "" {
		pg = perTurn(from.pgCPU, until.pgCPU, turns)
		if from.pgBackends >= 0 && until.pgBackends >= 0 {
			pg += " (its daemons' backends " + perTurn(from.pgBackends, until.pgBackends, turns) + ")"
		}
		if b.perf.postmaster < 0 {
			pg = "n/a (" + b.perf.postmasterWhy + ")"
		}
	}
	b.rep.add(section, "  CPU per "+unit+", Postgres / Redis / the bench itself", pg+" / "+redis+" / "+perTurn(from.bench, until.bench, turns), "", "")
	if from.busy >= 0 && until.busy > from.busy {
		busy := until.busy - from.busy
		share := float64(busy) / float64(until.all-from.all)
		rest := busy - daemons
		for _, c := range [][2]time.Duration{{from.pgCPU, until.pgCPU}, {from.redisCPU, until.redisCPU}, {from.bench, until.bench}} {
			if c[0] >= 0 && c[1] >= 0 {
				rest -= c[1] - c[0]
			}
		}
		b.rep.add(section, fmt.Sprintf("  machine CPU busy (of %d cores): share, per %s, of which nothing above", runtime.NumCPU(), unit),
			fmt.Sprintf("%.0f%% / %s / %s", 100*share, ms(busy/time.Duration(turns)), ms(rest/time.Duration(turns))), "", "")
	}
	if b.rdb != nil {
		b.rep.add(section, "  Redis commands per "+unit+" (all, then the most called; a script's own calls count)", commandsPerTurn(from.redisCalls, until.redisCalls, turns, 5), "", "")
	}
	redisTrips := "n/a (in-process)"
	if b.rdb != nil {
		// The window's last sample read INFO three times.
		redisTrips = countPerTurn(from.redisReads, until.redisReads, 3, turns)
	}
	b.rep.add(section, "  round trips to Redis (reads it processed) / the machine's context switches, per "+unit,
		redisTrips+" / "+countPerTurn(from.switches, until.switches, 0, turns), "", "")
	if from.daemonSwitches.known() || from.pgSwitches.known() || from.redisSwitches.known() {
		b.rep.add(section, "  … of which, per "+unit+", slept + preempted: the daemons / their Postgres backends / Redis",
			switchesPerTurn(from.daemonSwitches, until.daemonSwitches, turns)+" / "+
				switchesPerTurn(from.pgSwitches, until.pgSwitches, turns)+" / "+
				switchesPerTurn(from.redisSwitches, until.redisSwitches, turns), "", "")
	}
	if b.cfg.DatabaseURL != "" {
		own := until.own - from.own
		stmts := "n/a (no pg_stat_statements)"
		if b.perf.pgStatements != "" {
			stmts = countPerTurn(from.pgStmts, until.pgStmts, own, turns)
		}
		b.rep.add(section, "  Postgres transactions / statements / WAL flushes per "+unit+" (not the bench's own)",
			countPerTurn(from.pgXacts, until.pgXacts, own, turns)+" / "+stmts+" / "+countPerTurn(from.pgSyncs, until.pgSyncs, 0, turns), "", "")
		if from.pgWALBytes >= 0 && until.pgWALBytes >= 0 {
			b.rep.add(section, "  WAL per "+unit+": KB / full page images (a checkpoint in the window raises both)",
				strconv.FormatFloat(float64(until.pgWALBytes-from.pgWALBytes)/1024/float64(turns), 'f', 2, 64)+" / "+countPerTurn(from.pgFPIs, until.pgFPIs, 0, turns), "", "")
		}
	}
}

// noteStatements notes the Postgres statements per turn of a topology
// between two samples, the most called by the start of their text (too
// wide for the table).
func (b *bencher) noteStatements(label string, from, until usage, turns int64) {
	if from.pgCalls == nil || until.pgCalls == nil || turns <= 0 {
		return
	}
	b.rep.note(fmt.Sprintf("throughput (%s): Postgres statements per turn, the bench's own included, then the most called: %s", label,
		callsPerTurn(from.pgCalls, until.pgCalls, turns, 4, func(q string) string { return "«" + q + "…»" }, " ")))
}

// switches counts the context switches of a process, or of several:
// slept are those it made itself (it waited for input, a lock, the disk,
// a timer, or had nothing to do), preempted those the scheduler made (its
// time was up, or a woken process took its core). slept is -1 when
// unknown.
type switches struct{ slept, preempted int64 }

// unknownSwitches is a count that could not be read.
var unknownSwitches = switches{slept: -1, preempted: -1}

func (s switches) known() bool { return s.slept >= 0 }

// plus is s and o together, unknown if either is.
func (s switches) plus(o switches) switches {
	if !s.known() || !o.known() {
		return unknownSwitches
	}
	return switches{s.slept + o.slept, s.preempted + o.preempted}
}

// since is what s counted after from, unknown if either is. A process
// that exited meanwhile takes its count with it, so a part never goes
// below zero.
func (s switches) since(from switches) switches {
	if !s.known() || !from.known() {
		return unknownSwitches
	}
	return switches{max(s.slept-from.slept, 0), max(s.preempted-from.preempted, 0)}
}

// switchesPerTurn formats the switches between two counts per turn, as
// "slept + preempted", or n/a.
func switchesPerTurn(from, until switches, turns int64) string {
	d := until.since(from)
	if !d.known() || turns <= 0 {
		return "n/a"
	}
	per := func(n int64) string { return strconv.FormatFloat(float64(n)/float64(turns), 'f', 2, 64) }
	return per(d.slept) + " + " + per(d.preempted)
}

// describePages says how memory is mapped in pages, from the content of
// /sys/kernel/mm/transparent_hugepage/enabled (the mode in brackets) and
// /proc/meminfo's HugePages_Total, HugePages_Free, HugePages_Rsvd and
// Hugepagesize (in kB), each nil or empty when unknown; "" when nothing
// is. The pages taken are those in use and those a mapping reserved and
// has not touched yet (which /proc/meminfo counts as free).
func describePages(thp string, total, free, rsvd, sizeKB *uint64) string {
	var parts []string
	if i, j := strings.IndexByte(thp, '['), strings.IndexByte(thp, ']'); i >= 0 && j > i+1 {
		parts = append(parts, "transparent huge pages "+thp[i+1:j])
	}
	switch {
	case total == nil:
	case *total == 0:
		parts = append(parts, "no huge pages reserved")
	default:
		s := fmt.Sprintf("%d huge pages reserved", *total)
		if sizeKB != nil {
			s += fmt.Sprintf(" of %d kB", *sizeKB)
		}
		if free != nil && rsvd != nil {
			s += fmt.Sprintf(" (%d taken)", *total-*free+*rsvd)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
