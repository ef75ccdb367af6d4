package worker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prchat/prchat/chat"
)

// Turns is what the reconciler needs from the domain; implemented by
// *chat.Turns.
type Turns interface {
	// PendingTurns lists the turns in state queued or running, each with
	// its ids, state, queue, runner, fence, backend and times (not its
	// question or answer).
	PendingTurns(ctx context.Context) ([]chat.Turn, error)
	// Enqueue routes the turn (its session host's queue if that host is
	// alive, else the shared queue), enqueues its job and records the queue.
	// t is the pass's read of the turn: a turn that is gone, or whose state
	// or fence changed since, is left alone and Enqueue reports false.
	Enqueue(ctx context.Context, t chat.Turn) (bool, error)
	// Settle settles a pending turn and emits its final event. A turn that
	// is already final returns chat.ErrSettled.
	Settle(ctx context.Context, turnID string, state chat.State, reason chat.Reason, note string) error
}

// noteFailedJob is the note of a turn settled failed because its job was
// archived; the job's last error goes to the log under the trace id.
const noteFailedJob = "Its job failed %d times; the cause is in the server's log under trace id %s."

// ReconcilerConfig configures a Reconciler.
type ReconcilerConfig struct {
	// Interval is the time between two passes of a started Reconciler.
	// Default 5s.
	Interval time.Duration
	// Grace is how old a queued turn must be before its missing job counts
	// as lost (the API enqueues it right after storing it), and how long a
	// queued turn's job may run without claiming the turn before its worker
	// counts as dead. Default 2s.
	Grace time.Duration
	// Policy is the turns' policy, as chat.Turns and chat.Runner have it: a running
	// turn whose runner died and that is out of attempts is settled as
	// interrupted rather than handed to another worker, and one whose
	// runner looks alive but that has no job is handed on after its Stuck
	// window.
	Policy chat.TurnPolicy
	// Holder names this reconciler in its lease (the runner id of its
	// worker). Default: a random id.
	Holder string
	// LeaseTTL is how long the reconciler's lease outlives its holder's
	// last renewal (every LeaseTTL/3): one reconciler of a deployment holds
	// it and makes the passes, and when its process dies, another takes
	// over within LeaseTTL and a third. Default 2×Interval.
	LeaseTTL time.Duration
	// Logger receives what the reconciler did, per turn. Default: discard.
	Logger *slog.Logger
	// Now tells the time. Default time.Now.
	Now func() time.Time
	// BeforePass, when set, runs before each pass of a started
	// Reconciler, in its loop (a test holds a pass there).
	BeforePass func()
}

func (c ReconcilerConfig) withDefaults() ReconcilerConfig {
	c.Interval = cmp.Or(c.Interval, 5*time.Second)
	c.Grace = cmp.Or(c.Grace, 2*time.Second)
	c.Holder = cmp.Or(c.Holder, newTraceID())
	c.LeaseTTL = cmp.Or(c.LeaseTTL, 2*c.Interval)
	c.Policy = c.Policy.WithDefaults()
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c ReconcilerConfig) validate() error {
	switch {
	case c.Interval < 10*time.Millisecond:
		return fmt.Errorf("reconciler interval %v is under 10ms", c.Interval)
	case c.Grace < 0:
		return fmt.Errorf("reconciler grace %v is negative", c.Grace)
	case c.LeaseTTL < 20*time.Millisecond:
		return fmt.Errorf("reconciler lease TTL %v is under 20ms", c.LeaseTTL)
	}
	if err := c.Policy.Validate(); err != nil {
		return fmt.Errorf("reconciler: %w", err)
	}
	return nil
}

// Counts says what a reconciler pass did, or all passes (Totals).
type Counts struct {
	// Checked counts the pending turns looked at.
	Checked int
	// Enqueued counts queued turns whose job was missing and was enqueued
	// again.
	Enqueued int
	// Moved counts jobs taken out of a dead worker's queue and enqueued again
	// (on the shared queue, unless the turn's session host is alive).
	Moved int
	// Rescued counts rescue jobs enqueued for turns whose worker died.
	Rescued int
	// Failed counts turns settled as failed because their job was archived
	// (it failed more often than the policy's JobRetries).
	Failed int
	// Interrupted counts running turns settled as interrupted because their
	// worker died and they had used their MaxAttempts.
	Interrupted int
	// Swept counts archived jobs deleted because no pending turn needs them
	// (their turn settled or was deleted, or they were no turn's).
	Swept int
	// Leased counts running jobs given back the lease that Redis lost
	// (asynq's recoverer never looks at a running job without one).
	Leased int
	// Errors counts turns the pass could not reconcile.
	Errors int
}

func (c *Counts) add(o Counts) {
	c.Checked += o.Checked
	c.Enqueued += o.Enqueued
	c.Moved += o.Moved
	c.Rescued += o.Rescued
	c.Failed += o.Failed
	c.Interrupted += o.Interrupted
	c.Swept += o.Swept
	c.Leased += o.Leased
	c.Errors += o.Errors
}

// Reconciler compares the pending turns with their jobs in Redis and repairs
// the difference, so that every turn reaches a final state. Rules, per
// pending turn:
//
//   - queued, older than Grace, no job in any queue: enqueue it again (a
//     Redis that lost its data loses no question);
//   - no live job but an archived one (it failed too often): settle the turn
//     failed (backend_error) with the job's last error, delete the job;
//   - a waiting job in the queue of a dead worker: delete it and enqueue the
//     turn again (which routes it to the shared queue);
//   - queued, its job running for longer than Grace without claiming the
//     turn, or running in a dead worker's queue: enqueue a rescue job;
//   - running, its runner dead (no heartbeat from that instance): settle it
//     interrupted when out of attempts; else leave a waiting job be (moving
//     it out of a dead worker's queue); else (its job still active on the
//     dead worker, or gone) enqueue a rescue job on the shared queue;
//   - running, its runner alive but no job left for longer than the policy's
//     Stuck window since it started: enqueue a rescue job.
//
// And per job: an archived job that no pending turn needs is deleted; a
// running job that has no lease in asynq (a Redis failover to a replica that
// missed the lease's write leaves such jobs, and asynq's recoverer never
// looks at them) gets a fresh one, which its worker, if alive, extends, and
// which otherwise expires and has asynq retry the job.
//
// A pass reads the pending turns in one query and every job of every queue
// in one MULTI, so its cost per pending turn does not grow with the number
// of queues. Every worker process runs a Reconciler, but only the one
// holding the deployment's lease in Redis (prchat:reconciler:lease) passes;
// the others try to take the lease every LeaseTTL/3, and one does when its
// holder stops (it gives the lease up) or dies (the lease expires). Two
// reconcilers passing at once (a lease lost to a Redis failover) cost work,
// not correctness: every action is idempotent (TaskIDs, fences, ErrSettled).
type Reconciler struct {
	turns Turns
	queue *Queue
	hosts chat.Hosts
	cfg   ReconcilerConfig
	log   *slog.Logger
	lease *lease

	pass        sync.Mutex           // one pass at a time
	activeSince map[string]time.Time // queued turns whose job runs unclaimed, by turn id
	totals      Counts               // guarded by pass
	passes      int                  // guarded by pass

	holds  atomic.Bool // whether this reconciler held the lease at its last try
	gained chan struct{}
	lc     *lifecycle
	kick   chan struct{} // a pass at once
	ctx    context.Context
}

// NewReconciler returns a Reconciler of turns' jobs in queue, asking hosts
// which workers are alive.
func NewReconciler(turns Turns, queue *Queue, hosts chat.Hosts, cfg ReconcilerConfig) (*Reconciler, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("worker reconciler config: %w", err)
	}
	if turns == nil || queue == nil || hosts == nil {
		return nil, errors.New("worker reconciler: Turns, Queue and Hosts are required")
	}
	return &Reconciler{
		turns: turns, queue: queue, hosts: hosts, cfg: cfg,
		log:         cfg.Logger.With(slog.String("component", "reconciler")),
		lease:       &lease{rdb: queue.rdb, key: reconcilerLeaseKey, holder: cfg.Holder, ttl: cfg.LeaseTTL},
		activeSince: map[string]time.Time{},
		gained:      make(chan struct{}, 1),
		lc:          newLifecycle("worker reconciler"),
		kick:        make(chan struct{}, 1),
	}, nil
}

// Start tries to take the deployment's lease at once, and then reconciles
// in the background while it holds it, until Stop or until ctx ends: at
// once when it took the lease (what an earlier run left queued or
// running), then every Interval, and as soon as it takes the lease from
// another holder. Start does not wait for a pass: with thousands of turns
// pending the first one takes seconds, and its process serves meanwhile.
// Call ReconcileOnce for a pass that the caller waits for.
func (r *Reconciler) Start(ctx context.Context) error {
	return r.lc.start(ctx, func(ctx context.Context) error {
		r.ctx = context.WithoutCancel(ctx)
		r.tryLease(ctx)
		return nil
	}, r.loop)
}

// Holds reports whether this reconciler held the deployment's lease when it
// last tried (it tries every LeaseTTL/3 while started).
func (r *Reconciler) Holds() bool { return r.holds.Load() }

// tryLease takes or renews the lease and reports whether it was taken now.
func (r *Reconciler) tryLease(ctx context.Context) bool {
	held, err := r.lease.hold(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.WarnContext(ctx, "reconciler lease", slog.Any("err", err))
		}
		// Redis does not answer: nobody can do a pass's work anyway; keep
		// passing if it held the lease (a pass fails fast without Redis).
		return false
	}
	was := r.holds.Swap(held)
	if held != was {
		r.log.InfoContext(ctx, "reconciler lease", slog.Bool("held", held), slog.String("holder", r.cfg.Holder))
	}
	return held && !was
}

// keepLease tries the lease every LeaseTTL/3, and signals gained when it
// took it from nobody.
func (r *Reconciler) keepLease(ctx context.Context) {
	t := time.NewTicker(r.cfg.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.tryLease(ctx) {
			select {
			case r.gained <- struct{}{}:
			default:
			}
		}
	}
}

func (r *Reconciler) loop(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { r.keepLease(ctx) })
	defer wg.Wait()
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	var followUp <-chan time.Time // a pass once the turns a kicked pass found too young are not
	if r.holds.Load() {
		r.passInLoop(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.gained:
			// The last holder may have died with turns to take over.
		case <-followUp:
			followUp = nil
		case <-r.kick:
			// Turns asked just before Redis lost its data are younger than
			// Grace now; they get their jobs one Grace later, not at the next
			// Interval. The lease went with the data: take it now.
			followUp = time.After(r.cfg.Grace + 100*time.Millisecond)
			r.tryLease(ctx)
		}
		if r.holds.Load() {
			r.passInLoop(ctx)
		}
	}
}

// passInLoop makes one of the loop's passes.
func (r *Reconciler) passInLoop(ctx context.Context) {
	if r.cfg.BeforePass != nil {
		r.cfg.BeforePass()
	}
	if _, err := r.ReconcileOnce(ctx); err != nil && ctx.Err() == nil {
		r.log.WarnContext(ctx, "reconcile", slog.Any("err", err))
	}
}

// Stop stops the background passes, waits for a running one to end and
// gives the lease up, so that another reconciler takes it at once. It is
// safe to call twice, and before Start.
func (r *Reconciler) Stop() {
	r.lc.stop(nil, func() {
		if !r.holds.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(r.ctx, time.Second)
		defer cancel()
		if err := r.lease.release(ctx); err != nil {
			r.log.WarnContext(ctx, "reconciler lease", slog.Any("err", err))
		}
		r.holds.Store(false)
	})
}

// Kick makes a started Reconciler pass at once (or right after the pass
// that runs now) if it holds the lease or can take it, and again one Grace
// later, rather than at its next Interval: the heartbeat kicks it when
// Redis lost its data, so that lost jobs are enqueued again within moments.
// It never blocks.
func (r *Reconciler) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Totals sums the Counts of all passes so far.
func (r *Reconciler) Totals() Counts {
	r.pass.Lock()
	defer r.pass.Unlock()
	return r.totals
}

// Passes counts the passes made so far.
func (r *Reconciler) Passes() int {
	r.pass.Lock()
	defer r.pass.Unlock()
	return r.passes
}

// ReconcileOnce makes one pass over the pending turns and says what it did,
// whether or not this reconciler holds the lease. It goes on after a turn
// it cannot reconcile and returns those errors joined.
func (r *Reconciler) ReconcileOnce(ctx context.Context) (Counts, error) {
	r.pass.Lock()
	defer r.pass.Unlock()
	var c Counts
	defer func() { r.totals.add(c); r.passes++ }()

	// The jobs are read before the turns, and the pass's time is taken
	// before both. A job that ends between the reads ends with its turn, so
	// the turn is no longer pending when it is read (the other way round, a
	// drain of thousands of turns finished hundreds of them in the gap, and
	// each looked as if its job were lost). A turn whose first job comes
	// after the jobs were read is younger than Grace at the pass's time (the
	// API enqueues right after storing); one that gets a later job meanwhile
	// (handed on) is enqueued again at worst, and Enqueue reads it again
	// first.
	now := r.cfg.Now()
	queues, err := r.queue.Queues(ctx)
	if err != nil {
		return c, fmt.Errorf("reconcile: %w", err)
	}
	jobs, err := r.queue.snapshot(ctx, queues)
	if err != nil {
		return c, fmt.Errorf("reconcile: %w", err)
	}
	turns, err := r.turns.PendingTurns(ctx)
	if err != nil {
		return c, fmt.Errorf("reconcile: pending turns: %w", err)
	}
	p := &pass{r: r, now: now, counts: &c, alive: map[string]bool{}, runners: map[string]bool{}, activeSince: map[string]time.Time{}}
	// Turns are reconciled passConcurrency at a time: after Redis lost its
	// data every queued turn needs its job again, and one at a time that
	// took seconds for a few hundred.
	var errs []error
	var wg sync.WaitGroup
	sem := make(chan struct{}, passConcurrency)
	for _, t := range turns {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := p.turn(ctx, jobs.byTurn[t.ID], t)
			p.mu.Lock()
			defer p.mu.Unlock()
			c.Checked++
			if err != nil {
				c.Errors++
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return c, err
	}
	r.activeSince = p.activeSince
	pending := make(map[string]bool, len(turns))
	for _, t := range turns {
		pending[t.ID] = true
	}
	if err := p.sweep(ctx, jobs.archived, pending); err != nil {
		errs = append(errs, err)
	}
	if err := p.restoreLeases(ctx, jobs.orphans); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// sweep deletes the archived jobs that no pending turn needs, so that no
// archived job stays in Redis for good (asynq keeps them without a TTL). A
// pending turn's archived job is the turn's rules' business.
func (p *pass) sweep(ctx context.Context, archived []Task, pending map[string]bool) error {
	var errs []error
	for _, task := range archived {
		if pending[task.TurnID] {
			continue
		}
		if err := p.r.queue.DeleteTask(ctx, task); err != nil {
			errs = append(errs, err)
			continue
		}
		p.counts.Swept++
		p.r.log.InfoContext(ctx, "deleted archived job", slog.String("task", task.ID), slog.String("queue", task.Queue), slog.String("turn", task.TurnID))
	}
	return errors.Join(errs...)
}

// restoreLeases gives the running jobs that have no lease a fresh one.
func (p *pass) restoreLeases(ctx context.Context, orphans []Task) error {
	var errs []error
	for _, task := range orphans {
		restored, err := p.r.queue.restoreLease(ctx, task, time.Now())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if restored {
			p.counts.Leased++
			p.r.log.InfoContext(ctx, "restored a running job's lease", slog.String("task", task.ID), slog.String("queue", task.Queue), slog.String("turn", task.TurnID))
		}
	}
	return errors.Join(errs...)
}

// passConcurrency is how many turns one pass reconciles at once.
const passConcurrency = 16

// pass is the state of one ReconcileOnce.
type pass struct {
	r   *Reconciler
	now time.Time

	mu          sync.Mutex           // guards what follows: turns are reconciled at once
	counts      *Counts              // (the sweep after them is alone)
	alive       map[string]bool      // host -> alive, asked once per pass
	runners     map[string]bool      // runner -> alive, asked once per pass
	activeSince map[string]time.Time // carried to the next pass
}

// count changes the pass's counts.
func (p *pass) count(f func(c *Counts)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p.counts)
}

func (p *pass) hostAlive(ctx context.Context, host string) (bool, error) {
	p.mu.Lock()
	a, ok := p.alive[host]
	p.mu.Unlock()
	if ok {
		return a, nil
	}
	a, err := p.r.hosts.Alive(ctx, host)
	if err != nil {
		return false, err
	}
	p.mu.Lock()
	p.alive[host] = a
	p.mu.Unlock()
	return a, nil
}

func (p *pass) runnerAlive(ctx context.Context, runner string) (bool, error) {
	p.mu.Lock()
	a, ok := p.runners[runner]
	p.mu.Unlock()
	if ok {
		return a, nil
	}
	a, err := p.r.hosts.RunnerAlive(ctx, runner)
	if err != nil {
		return false, err
	}
	p.mu.Lock()
	p.runners[runner] = a
	p.mu.Unlock()
	return a, nil
}

// turn reconciles pending turn t, whose jobs the pass's snapshot found.
func (p *pass) turn(ctx context.Context, tasks []Task, t chat.Turn) error {
	if t.State.Final() {
		return nil
	}
	var live, archived []Task
	for _, task := range tasks {
		switch {
		case task.State.live():
			live = append(live, task)
		case task.State == TaskArchived:
			archived = append(archived, task)
		}
	}
	if len(archived) > 0 {
		// The snapshot has their ids; their retries and last error are
		// read only for the few turns that have one.
		var err error
		if archived, err = p.r.queue.withInfo(ctx, archived); err != nil {
			return fmt.Errorf("reconcile turn %s: %w", t.ID, err)
		}
	}
	var err error
	if t.State == chat.StateRunning {
		err = p.running(ctx, t, live, archived)
	} else {
		err = p.queued(ctx, t, live, archived)
	}
	if err != nil {
		return fmt.Errorf("reconcile turn %s: %w", t.ID, err)
	}
	return nil
}

func (p *pass) queued(ctx context.Context, t chat.Turn, live, archived []Task) error {
	if len(live) == 0 {
		if len(archived) > 0 {
			return p.settleFailed(ctx, t, archived)
		}
		if p.now.Sub(t.CreatedAt) < p.r.cfg.Grace {
			return nil
		}
		enqueued, err := p.r.turns.Enqueue(ctx, t)
		if err != nil || !enqueued {
			return err
		}
		p.count(func(c *Counts) { c.Enqueued++ })
		p.logAction(ctx, t, "enqueued", "its job was missing")
		return nil
	}
	live, moved, err := p.leaveDeadHosts(ctx, t, live)
	if err != nil || moved {
		return err
	}
	// Only running jobs remain: their handler should claim the turn within
	// milliseconds. One in a dead worker's queue will not; one elsewhere
	// gets Grace.
	for _, task := range live {
		if task.State != TaskActive {
			return nil // a job waits to run: nothing to do
		}
	}
	deadHolder := false
	for _, task := range live {
		if task.Host != "" {
			alive, err := p.hostAlive(ctx, task.Host)
			if err != nil {
				return err
			}
			deadHolder = deadHolder || !alive
		}
	}
	since, seen := p.r.activeSince[t.ID]
	if !seen {
		since = p.now
	}
	if !deadHolder && p.now.Sub(since) < p.r.cfg.Grace {
		p.mu.Lock()
		p.activeSince[t.ID] = since
		p.mu.Unlock()
		return nil
	}
	reason := "its job runs on a dead worker"
	if !deadHolder {
		reason = "its job has run for longer than the grace period without claiming it"
	}
	return p.rescue(ctx, t, reason)
}

func (p *pass) running(ctx context.Context, t chat.Turn, live, archived []Task) error {
	alive, err := p.runnerAlive(ctx, t.Runner)
	if err != nil {
		return err
	}
	if alive {
		switch {
		case len(live) > 0:
			return nil
		case len(archived) > 0:
			// Its last handler gave up for good and nothing runs it.
			return p.settleFailed(ctx, t, archived)
		case t.StartedAt != nil && p.now.Sub(*t.StartedAt) > p.r.cfg.Policy.Windows().Stuck:
			return p.rescue(ctx, t, "it has run for longer than the turn may, and it has no job")
		}
		return nil
	}
	if p.r.cfg.Policy.OutOfAttempts(t.Fence) {
		settled, err := p.settle(ctx, t, chat.StateInterrupted, chat.ReasonInterrupted, chat.InterruptedNote(t.Fence))
		if err != nil {
			return err
		}
		if settled {
			p.count(func(c *Counts) { c.Interrupted++ })
			p.logAction(ctx, t, "settled interrupted", fmt.Sprintf("its runner died and it was started %d times", t.Fence))
		}
		return p.deleteTasks(ctx, archived)
	}
	if len(live) == 0 && len(archived) > 0 {
		return p.settleFailed(ctx, t, archived)
	}
	live, moved, err := p.leaveDeadHosts(ctx, t, live)
	if err != nil || moved {
		return err
	}
	for _, task := range live {
		if task.State != TaskActive {
			return nil // a job waits to run; a live worker takes the turn over
		}
	}
	// Its job is gone, or asynq still counts it as running on the dead
	// worker (asynq recovers it only after 60-120 s).
	return p.rescue(ctx, t, "its runner died")
}

// leaveDeadHosts deletes the waiting jobs that sit in a dead worker's queue
// and, when no other job waits for the turn, enqueues the turn again. It
// returns the jobs left and whether any was moved.
func (p *pass) leaveDeadHosts(ctx context.Context, t chat.Turn, live []Task) ([]Task, bool, error) {
	var left []Task
	moved, waitingElsewhere := false, false
	for _, task := range live {
		if task.Host != "" && task.State.waiting() {
			alive, err := p.hostAlive(ctx, task.Host)
			if err != nil {
				return nil, false, err
			}
			if !alive {
				if err := p.r.queue.DeleteTask(ctx, task); err != nil {
					return nil, false, err
				}
				moved = true
				continue
			}
		}
		waitingElsewhere = waitingElsewhere || task.State.waiting()
		left = append(left, task)
	}
	if !moved {
		return left, false, nil
	}
	if !waitingElsewhere {
		if _, err := p.r.turns.Enqueue(ctx, t); err != nil {
			return nil, true, err
		}
	}
	p.count(func(c *Counts) { c.Moved++ })
	p.logAction(ctx, t, "moved", "its job sat in a dead worker's queue")
	return left, true, nil
}

func (p *pass) rescue(ctx context.Context, t chat.Turn, reason string) error {
	created, err := p.r.queue.Rescue(ctx, t.ID, t.Fence)
	if err != nil {
		return err
	}
	if created {
		p.count(func(c *Counts) { c.Rescued++ })
		p.logAction(ctx, t, "rescued", reason, slog.String("task", RescueTaskID(t.ID, t.Fence)))
	}
	return nil
}

func (p *pass) settleFailed(ctx context.Context, t chat.Turn, archived []Task) error {
	last := archived[0]
	for _, a := range archived[1:] {
		if a.Retried > last.Retried {
			last = a
		}
	}
	if strings.Contains(last.LastErr, string(chat.CodeUnavailable)+": ") {
		// Its runs failed because the database was unreachable (a worker
		// from before runs were retried through outages): the turn has not
		// failed, it runs again.
		if err := p.deleteTasks(ctx, archived); err != nil {
			return err
		}
		enqueued, err := p.r.turns.Enqueue(ctx, t)
		if err != nil || !enqueued {
			return err
		}
		p.count(func(c *Counts) { c.Enqueued++ })
		p.logAction(ctx, t, "enqueued", "its job was archived during a database outage")
		return nil
	}
	trace := newTraceID()
	note := fmt.Sprintf(noteFailedJob, last.Retried+1, trace)
	settled, err := p.settle(ctx, t, chat.StateFailed, chat.ReasonBackendError, note)
	if err != nil {
		return err
	}
	if settled {
		p.count(func(c *Counts) { c.Failed++ })
		p.logAction(ctx, t, "settled failed", "its job was archived", slog.Int("retried", last.Retried),
			slog.String("trace_id", trace), slog.String("last_error", cmp.Or(last.LastErr, "unknown")))
	}
	return p.deleteTasks(ctx, archived)
}

// newTraceID returns a random id that ties a note to a log line.
func newTraceID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// settle settles t and reports whether it did; a turn that settled
// meanwhile is not an error.
func (p *pass) settle(ctx context.Context, t chat.Turn, state chat.State, reason chat.Reason, note string) (bool, error) {
	err := p.r.turns.Settle(ctx, t.ID, state, reason, note)
	switch {
	case errors.Is(err, chat.ErrSettled):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

func (p *pass) deleteTasks(ctx context.Context, tasks []Task) error {
	var errs []error
	for _, task := range tasks {
		errs = append(errs, p.r.queue.DeleteTask(ctx, task))
	}
	return errors.Join(errs...)
}

func (p *pass) logAction(ctx context.Context, t chat.Turn, action, reason string, attrs ...any) {
	attrs = append([]any{
		slog.String("turn", t.ID), slog.String("state", string(t.State)),
		slog.String("action", action), slog.String("reason", reason),
	}, attrs...)
	p.r.log.InfoContext(ctx, "reconciled turn", attrs...)
}
