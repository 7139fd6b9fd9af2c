package rt

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryPolicy is a type's retry policy, the API's converted: the same
// fields (see its documentation).
type RetryPolicy struct {
	Attempts            int
	Backoff, MaxBackoff time.Duration
	Jitter              float64
}

// Wait returns how long to wait after the n-th failed attempt.
func (p RetryPolicy) Wait(n int) time.Duration {
	d := p.Backoff
	for i := 1; i < n && (p.MaxBackoff == 0 || d < p.MaxBackoff) && d < time.Duration(1)<<61; i++ {
		d *= 2
	}
	if p.MaxBackoff > 0 && d > p.MaxBackoff {
		d = p.MaxBackoff
	}
	if p.Jitter > 0 {
		d -= time.Duration(p.Jitter * rand.Float64() * float64(d))
	}
	return d
}

// Permanent returns an error that says err is not worth retrying: it
// matches ErrPermanent and wraps err, and its message is err's.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

type permanentError struct{ err error }

func (e permanentError) Error() string        { return e.err.Error() }
func (e permanentError) Unwrap() error        { return e.err }
func (e permanentError) Is(target error) bool { return target == ErrPermanent }

// Attempt is the API's Attempt, which documents it.
func Attempt(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

// AttemptInfo describes one attempt of a job that was retried.
type AttemptInfo struct {
	Start, End time.Time
	Err        error // nil for a successful last attempt
}

// attempts is the record of a job that was retried, kept in its task's err
// while it lives (so that a task stays 144 bytes) and after it ends: its
// attempts, the context every attempt's derives from, and its result.
type attempts struct {
	list    []AttemptInfo
	parent  context.Context // of the first attempt's context
	allowed int             // attempts allowed in all, if set: a dead job retried by hand
	result  error           // once the job has ended
}

// attemptsOf returns t's attempt record, or nil if it never failed an
// attempt that was retried.
func attemptsOf(t *task) *attempts {
	a, _ := t.err.(*attempts)
	return a
}

// Error lets an attempts record stand in t.err; it never reaches a caller
// (resultOf).
func (a *attempts) Error() string { return fmt.Sprint(a.result) }

// newAttempts returns a new attempt record for t, whose first attempt
// runs.
func newAttempts(t *task) *attempts { return &attempts{parent: t.ctx.parent} }

// add records in a an attempt of t that ended at now with err.
func (a *attempts) add(tb *timebase, t *task, err error, now int64) {
	a.list = append(a.list, AttemptInfo{Start: tb.timeOf(t.rec.Started()), End: tb.timeOf(now), Err: err})
}

// resultOf returns the error a job ended with.
func resultOf(t *task) error {
	if a := attemptsOf(t); a != nil {
		return a.result
	}
	return t.err
}

// setResultLocked records the error t ends with.
func setResultLocked(t *task, err error) {
	if a := attemptsOf(t); a != nil {
		a.result = err
		return
	}
	t.err = err
}

// retries is the retry policy of every job type: the policies, and the
// decision once an attempt ends. Guarded by Runtime.mu.
type retries struct {
	byType map[string]RetryPolicy // the types that retry; nil: none does
	tb     *timebase
}

// note keeps type name's policy, if it retries.
func (r *retries) note(name string, p RetryPolicy) {
	if p == (RetryPolicy{}) {
		return
	}
	if r.byType == nil {
		r.byType = make(map[string]RetryPolicy)
	}
	r.byType[name] = p
}

// again decides, once t's attempt that started at its engine record's
// start time ended at now with err, whether to try it again: it records
// the attempt (in the attempts record made at the first that failed) and
// returns when the next may start, and true; or false, for a job done:
// it succeeded, its error matches ErrPermanent, its attempts are spent,
// or stop says it may not go on (cancelled while it ran, or the
// scheduler closing).
func (r *retries) again(t *task, err error, stop bool, now int64) (notBefore int64, retry bool) {
	if r.byType == nil && t.err == nil {
		return 0, false // no type retries, no attempt record: the common case, inlined
	}
	return r.decide(t, err, stop, now)
}

func (r *retries) decide(t *task, err error, stop bool, now int64) (notBefore int64, retry bool) {
	p := r.byType[t.rec.Type()]
	a := attemptsOf(t)
	if a == nil {
		if err == nil || p.Attempts <= 1 {
			return 0, false
		}
		a = newAttempts(t)
		t.err = a
	}
	a.add(r.tb, t, err, now)
	limit := p.Attempts
	if a.allowed > 0 {
		limit = a.allowed
	}
	if err == nil || stop || errors.Is(err, ErrPermanent) || len(a.list) >= limit {
		return 0, false
	}
	return now + p.Wait(len(a.list)).Microseconds(), true
}
