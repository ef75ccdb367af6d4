package chat

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"
)

// outageBackoff spaces a run's store calls while the database is
// unreachable.
var outageBackoff = Backoff{First: 100 * time.Millisecond, Max: 2 * time.Second}

// Unavailable reports whether err says that a part prchat needs (the
// database) cannot be reached for now: a call that fails so is worth
// retrying, and its turn has not failed.
func Unavailable(err error) bool { return ErrorCode(err) == CodeUnavailable }

// whileUnavailable calls f until it returns anything but an unavailable
// error, ctx ends or the deadline passes, waiting longer after each failure
// (outageBackoff). It returns f's last error.
func (s *Runner) whileUnavailable(ctx context.Context, deadline time.Time, what string, f func() error) error {
	for n := 1; ; n++ {
		err := f()
		if !Unavailable(err) || ctx.Err() != nil || time.Now().Add(outageBackoff.Delay(n)).After(deadline) {
			return err
		}
		if n == 1 {
			s.log.WarnContext(ctx, "database unreachable; retrying", slog.String("call", what), slog.Any("err", err))
		}
		if outageBackoff.Wait(ctx, n) != nil {
			return err
		}
	}
}

// Texts a client sees of a failure that prchat cannot explain to it.
const (
	noteInternal = "The turn failed because of an internal error; its cause is in the server's log under trace id %s."
)

// newTraceID returns a random id that ties a client-visible failure to the
// log line that holds its cause.
func newTraceID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
