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

// attemptKey is the context key of a job's attempt number.
type attemptKey struct{}

// Attempt returns the number of the attempt whose context ctx is (or
// derives from): 1 for a job's first, 2 for its first retry. It returns
// 0 for a context that is not a job's.
func Attempt(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

// Attempts returns the attempts of a job that was retried, in order, each
// with its times and error (nil for a last attempt that succeeded); nil
// for a job that made one attempt, whose only error is Err's.
func (h Handle) Attempts() []AttemptInfo {
	if h.t == nil {
		return nil
	}
	s := h.scheduler()
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := attemptsOf(h.t); a != nil {
		return append([]AttemptInfo(nil), a.list...)
	}
	return nil
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

// newAttemptsLocked returns a new attempt record for t, whose first
// attempt runs.
func (s *Runtime) newAttemptsLocked(t *task) *attempts { return &attempts{parent: t.ctx.parent} }

// addAttemptLocked records in a t's attempt that ended at now with err.
func (s *Runtime) addAttemptLocked(a *attempts, t *task, err error, now int64) {
	a.list = append(a.list, AttemptInfo{Start: s.timeOf(t.rec.Started()), End: s.timeOf(now), Err: err})
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

// retryLocked decides, once t's attempt that started at its engine
// record's start time ended at now with err, whether to try it again.
// cancelled says the attempt's context was cancelled while it ran. If it
// retries, it records the attempt, gives t a context for the next one and
// puts it back in the engine, delayed by its policy's backoff, and reports
// true.
func (s *Runtime) retryLocked(t *task, err error, cancelled bool, now int64) bool {
	if s.retries == nil && t.err == nil {
		return false // no type retries, no attempt record: the common case, inlined
	}
	return s.retryTypedLocked(t, err, cancelled, now)
}

func (s *Runtime) retryTypedLocked(t *task, err error, cancelled bool, now int64) bool {
	p := s.retries[t.rec.Type()]
	a := attemptsOf(t)
	if a == nil {
		if err == nil || p.Attempts <= 1 {
			return false
		}
		a = s.newAttemptsLocked(t)
		t.err = a
	}
	s.addAttemptLocked(a, t, err, now)
	limit := p.Attempts
	if a.allowed > 0 {
		limit = a.allowed
	}
	if err == nil || cancelled || s.closed || errors.Is(err, ErrPermanent) || len(a.list) >= limit {
		return false
	}
	next := &jobContext{parent: a.parent, valuesOnly: !t.isSync(), attempt: int32(len(a.list) + 1)}
	t.ctx, t.submitCtx = next, nil // a Submit job's, made already
	notBefore := now + p.Wait(len(a.list)).Microseconds()
	started := t.rec.Started() // read first: Retry reuses the word
	s.eng.Retry(&t.rec, notBefore, now)
	if s.durable != nil {
		s.durableRetriedLocked(t, err, started, notBefore, now)
	}
	s.armLocked(now)
	if s.cfg.Signals != nil {
		s.cfg.Signals.Retried <- t.rec.Seq()
	}
	return true
}
