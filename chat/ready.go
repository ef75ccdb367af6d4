package chat

import "context"

// Pinger is a part whose reachability can be checked: the database, the
// queue's broker.
type Pinger interface {
	// Ping checks that the part answers.
	Ping(ctx context.Context) error
}

// Readiness tells whether the parts an API process needs answer.
type Readiness struct {
	db, queue Pinger
}

// NewReadiness returns the Readiness of a process over its database and
// its queue.
func NewReadiness(db, queue Pinger) *Readiness { return &Readiness{db: db, queue: queue} }

// Ready checks that the database and the queue answer. Its error is a
// CodeUnavailable error whose message names the part that does not answer,
// not why (that is its cause, for the log).
func (r *Readiness) Ready(ctx context.Context) error {
	if err := r.db.Ping(ctx); err != nil {
		return &Error{Code: CodeUnavailable, Message: "the database does not answer", Err: err}
	}
	if err := r.queue.Ping(ctx); err != nil {
		return &Error{Code: CodeUnavailable, Message: "the queue does not answer", Err: err}
	}
	return nil
}
