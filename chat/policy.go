package chat

import (
	"cmp"
	"errors"
	"fmt"
	"time"
)

// TurnPolicy is the policy of a turn's life that Turns, the Runner, the worker,
// the queue and the reconciler share: how long a run may take, how often a
// turn is run and its job retried, and whether one worker runs every turn. Each part reads it from here
// so that no two can disagree.
type TurnPolicy struct {
	// TurnTimeout bounds a turn's agent work, repairs included. Default 10m.
	TurnTimeout time.Duration
	// MaxAttempts is how many runs a turn gets: a turn whose runs ended
	// early this often (their workers stopped under them) is settled as
	// interrupted instead of run again. Default 3.
	MaxAttempts int
	// JobRetries is how often the queue runs a turn's job again after a
	// failed run before it archives the job (the reconciler then settles
	// the turn as failed). A cancelled job also counts as failed once; a
	// run that ended because the database was unreachable does not count.
	// Default 3.
	JobRetries int
	// JobRetry is the wait before each retry of a failed job. A cancelled
	// job is always retried once (its handler then finds the turn
	// settled), so it stays short. Default 500ms doubling up to 2s.
	JobRetry Backoff
	// SoleWorker says that one worker is the only one there can be (prchat
	// serve on its embedded Redis): every turn goes on the shared queue,
	// which that worker consumes alone; there is no host to pin a turn to
	// and no liveness to ask about.
	SoleWorker bool
}

// windowMargin is what each window of a turn adds to the one before it:
// room for a slow store, a slow kill of the agent's process tree and clock
// skew between hosts.
const windowMargin = time.Minute

// TurnWindows are the time limits of one run of a turn, all derived from
// the turn timeout (see TurnPolicy.Windows). They are in this order, each
// strictly after the one before:
//
//	Turn < Job < Takeover < Stuck
type TurnWindows struct {
	// Turn is the agent's time limit: the run settles the turn as timeout
	// when it is over.
	Turn time.Duration
	// Job bounds one run of the turn's job in the queue: past it, the queue
	// cancels the run, so a run always ends its turn itself first.
	Job time.Duration
	// Takeover is how long after a turn started another run may take it over
	// although its runner still looks alive: by then the queue has cancelled
	// the first run.
	Takeover time.Duration
	// Stuck is how long after a turn started the reconciler gives a running
	// turn whose runner looks alive but that has no job left to another
	// worker: the rescue run it enqueues may take over at once.
	Stuck time.Duration
}

// Windows derives the time limits of a run from the turn timeout.
func (p TurnPolicy) Windows() TurnWindows {
	t := p.withDefaults().TurnTimeout
	return TurnWindows{
		Turn:     t,
		Job:      t + windowMargin,
		Takeover: t + windowMargin + windowMargin/2,
		Stuck:    t + 2*windowMargin,
	}
}

// OutOfAttempts reports whether a turn that has been started runs times
// (its fence) has used all its attempts and must not be run again.
func (p TurnPolicy) OutOfAttempts(runs int64) bool {
	return runs >= int64(p.withDefaults().MaxAttempts)
}

// InterruptedNote is the note of a turn settled as interrupted after runs
// runs whose workers stopped under it.
func InterruptedNote(runs int64) string {
	return fmt.Sprintf("The turn was started %d times and each time the worker running it stopped.", runs)
}

func (p TurnPolicy) withDefaults() TurnPolicy {
	p.TurnTimeout = cmp.Or(p.TurnTimeout, 10*time.Minute)
	p.MaxAttempts = cmp.Or(p.MaxAttempts, 3)
	p.JobRetries = cmp.Or(p.JobRetries, 3)
	p.JobRetry = cmp.Or(p.JobRetry, Backoff{First: 500 * time.Millisecond, Max: 2 * time.Second})
	return p
}

// WithDefaults returns p with its unset fields at their defaults.
func (p TurnPolicy) WithDefaults() TurnPolicy { return p.withDefaults() }

// Validate checks a policy's limits.
func (p TurnPolicy) Validate() error {
	switch {
	case p.TurnTimeout < 0:
		return errors.New("the turn timeout must not be negative")
	case p.MaxAttempts < 0:
		return errors.New("the max attempts must not be negative")
	case p.JobRetries < 0 || p.JobRetries > 100:
		return fmt.Errorf("the job retries %d are outside 0..100", p.JobRetries)
	}
	if p.JobRetry != (Backoff{}) {
		if err := p.JobRetry.Validate(); err != nil {
			return fmt.Errorf("job retry: %w", err)
		}
	}
	return nil
}
