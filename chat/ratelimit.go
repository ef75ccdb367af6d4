package chat

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rate is a limit of Count events per Per, with bursts of up to Count. A
// zero Count means no limit.
type Rate struct {
	Count int
	Per   time.Duration
}

// Off reports whether the rate sets no limit.
func (r Rate) Off() bool { return r.Count <= 0 || r.Per <= 0 }

// RateLimiter counts events against limits that hold for the whole
// deployment (every API process). Implemented by package worker on Redis.
type RateLimiter interface {
	// Allow takes one event of key under limit at now. When the limit is
	// reached it takes nothing and returns how long until an event is
	// allowed again.
	Allow(ctx context.Context, key string, limit Rate, now time.Time) (retryAfter time.Duration, err error)
}

// RateLimited returns the error of a request refused by a rate limit:
// CodeRateLimited, with the wait in RetryAfter.
func RateLimited(what string, retryAfter time.Duration) *Error {
	return &Error{Code: CodeRateLimited, Message: fmt.Sprintf("too many %s; try again in %s", what, retryAfter.Round(time.Second)), RetryAfter: retryAfter}
}

// ParseRate reads a rate as settings write it: N/s, N/m or N/h (or N/<duration> such as N/10s); 0 is
// no limit.
func ParseRate(v string) (Rate, error) {
	if v == "0" || v == "" {
		return Rate{}, nil
	}
	n, per, ok := strings.Cut(v, "/")
	count, err := strconv.Atoi(n)
	if !ok || err != nil || count < 0 {
		return Rate{}, fmt.Errorf("not a rate such as 60/m: %q", v)
	}
	var d time.Duration
	switch per {
	case "s":
		d = time.Second
	case "m":
		d = time.Minute
	case "h":
		d = time.Hour
	default:
		if d, err = time.ParseDuration(per); err != nil || d <= 0 {
			return Rate{}, fmt.Errorf("not a rate such as 60/m: %q", v)
		}
	}
	return Rate{Count: count, Per: d}, nil
}

// questionLimits are the limits on questions: per repository and per API
// token, across the deployment. A nil limiter limits nothing.
type questionLimits struct {
	limiter  RateLimiter
	perRepo  Rate
	perToken Rate
	now      Clock
}

// take takes one question from the limits of the repository and of the
// request's token. Questions without a token (an API that is open
// because no token exists yet: a loopback daemon's own users) are not
// limited.
func (l questionLimits) take(ctx context.Context, repo string) error {
	if _, ok := TokenFrom(ctx); l.limiter == nil || !ok {
		return nil
	}
	now := l.now()
	if !l.perRepo.Off() {
		wait, err := l.limiter.Allow(ctx, "repo:"+repo, l.perRepo, now)
		if err != nil {
			return fmt.Errorf("rate limit of %s: %w", repo, err)
		}
		if wait > 0 {
			return RateLimited("questions about "+repo, wait)
		}
	}
	if t, _ := TokenFrom(ctx); !l.perToken.Off() {
		wait, err := l.limiter.Allow(ctx, "token:"+t.ID, l.perToken, now)
		if err != nil {
			return fmt.Errorf("rate limit of token %s: %w", t.ID, err)
		}
		if wait > 0 {
			return RateLimited("questions with this token", wait)
		}
	}
	return nil
}

// repoWait takes one question of repo's limit, or says how long until the
// limit allows one (questions from comments, which come with no token).
func (l questionLimits) repoWait(ctx context.Context, repo string) (time.Duration, error) {
	if l.limiter == nil || l.perRepo.Off() {
		return 0, nil
	}
	wait, err := l.limiter.Allow(ctx, "repo:"+repo, l.perRepo, l.now())
	if err != nil {
		return 0, fmt.Errorf("rate limit of %s: %w", repo, err)
	}
	return wait, nil
}
