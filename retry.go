package fairsched

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fairsched/fairsched/internal/rt"
)

// RetryPolicy says how the failed attempts of a job type's jobs are
// retried. The zero value means no retry: one attempt.
//
// After the n-th failed attempt a job waits Backoff×2^(n-1), at most
// MaxBackoff if that is set, less a random part of up to Jitter of it,
// then is queued again. While it waits it holds no slot and is out of the
// dispatcher's sight; its aging clock keeps running from its submission,
// its start deadline still bounds it, and its key is charged every
// attempt's time. An attempt is not retried if its error matches
// ErrPermanent (see Permanent), if the job was cancelled (by its Handle,
// its RunSync context or Close) while it ran, or once Attempts have been
// made.
type RetryPolicy struct {
	// Attempts is the most attempts a job makes, the first included; 0
	// and 1 mean one.
	Attempts int
	// Backoff is the wait after the first failed attempt, doubled after
	// each next; it must be positive when Attempts is more than 1.
	Backoff time.Duration
	// MaxBackoff caps the wait; 0 means no cap.
	MaxBackoff time.Duration
	// Jitter, in [0, 1], is the largest part of each wait taken off at
	// random, so that jobs that failed together do not retry together. 0
	// makes the waits exact.
	Jitter float64
}

func (p RetryPolicy) validate(name string) error {
	var errs []error
	add := func(problem string) {
		errs = append(errs, fmt.Errorf("fairsched: job type %q: Retry.%s", name, problem))
	}
	switch {
	case p.Attempts < 0:
		add(fmt.Sprintf("Attempts is %d; it must not be negative", p.Attempts))
	case p.Attempts > 1 && p.Backoff <= 0:
		add(fmt.Sprintf("Backoff is %v; with %d attempts it must be positive", p.Backoff, p.Attempts))
	}
	if p.MaxBackoff < 0 {
		add(fmt.Sprintf("MaxBackoff is %v; it must be 0 (no cap) or positive", p.MaxBackoff))
	}
	if !(p.Jitter >= 0 && p.Jitter <= 1) {
		add(fmt.Sprintf("Jitter is %v; it must be between 0 and 1", p.Jitter))
	}
	return errors.Join(errs...)
}

// Permanent returns an error that says err is not worth retrying: it
// matches ErrPermanent and wraps err, and its message is err's.
func Permanent(err error) error {
	return rt.Permanent(err)
}

// Attempt returns the number of the attempt whose context ctx is (or
// derives from): 1 for a job's first, 2 for its first retry. It returns
// 0 for a context that is not a job's.
func Attempt(ctx context.Context) int {
	return rt.Attempt(ctx)
}

// Attempts returns the attempts of a job that was retried, in order, each
// with its times and error (nil for a last attempt that succeeded); nil
// for a job that made one attempt, whose only error is Err's.
func (h Handle) Attempts() []AttemptInfo {
	return attemptInfos(h.h.Attempts())
}

// AttemptInfo describes one attempt of a job that was retried.
type AttemptInfo struct {
	Start, End time.Time
	Err        error // nil for a successful last attempt
}

// attemptInfos returns the run-time layer's record of attempts as the
// API's: the same fields.
func attemptInfos(list []rt.AttemptInfo) []AttemptInfo {
	return convertAll(list, func(x rt.AttemptInfo) AttemptInfo { return AttemptInfo(x) })
}
