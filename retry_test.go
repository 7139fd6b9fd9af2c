package fairsched

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fairsched/fairsched/internal/rt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errFlaky = errors.New("flaky")

// A flaky job succeeds on its third attempt: each failed attempt frees
// its slot and waits its backoff (1 s, then 2 s) out of the queue, the
// job reads its attempt number from its context, Wait returns once, after
// the last attempt, and every attempt is on the handle.
func TestRetryFlakyJobSucceedsOnAttempt3(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 1, Types: map[string]TypeConfig{
		"sync": {Retry: RetryPolicy{Attempts: 5, Backoff: time.Second}},
	}})
	attempts := make(chan int, 3)
	h, err := tt.s.Submit(context.Background(), Job{Type: "sync"}, func(ctx context.Context) error {
		n := Attempt(ctx)
		attempts <- n
		if n < 3 {
			return fmt.Errorf("attempt %d: %w", n, errFlaky)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 1, <-attempts)
	<-tt.sig.Retried
	assert.Equal(t, 0, tt.s.Stats().Running, "a failed attempt frees its slot")
	assert.Equal(t, 1, tt.s.Stats().Delayed, "and waits its backoff out of the queue")

	tt.set(time.Second - time.Microsecond)
	assert.Equal(t, 0, tt.s.Stats().Running)
	tt.set(time.Second)
	require.Equal(t, 2, <-attempts, "retried at exactly 1 s")
	<-tt.sig.Retried
	tt.set(3*time.Second - time.Microsecond)
	assert.False(t, ended(h))
	tt.set(3 * time.Second)
	require.Equal(t, 3, <-attempts, "then after 2 s more")
	require.NoError(t, h.Wait(context.Background()))

	got := h.Attempts()
	require.Len(t, got, 3)
	for i, want := range []time.Duration{0, time.Second, 3 * time.Second} {
		assert.Equal(t, tt.at(want), got[i].Start, "attempt %d", i+1)
	}
	assert.ErrorIs(t, got[0].Err, errFlaky)
	assert.ErrorIs(t, got[1].Err, errFlaky)
	assert.NoError(t, got[2].Err)
	st := tt.s.Stats()
	assert.EqualValues(t, 2, st.Retries)
	assert.EqualValues(t, 1, st.Completed)
	assert.Zero(t, st.Failed)
}

// Out of attempts, the job fails with its last error; a permanent error
// stops at once; the backoff doubles up to its ceiling.
func TestRetryGivesUp(t *testing.T) {
	tt := newTimeTest(t, Config{Types: map[string]TypeConfig{
		"sync": {Retry: RetryPolicy{Attempts: 4, Backoff: time.Second, MaxBackoff: 3 * time.Second}},
	}})
	always, err := tt.s.Submit(context.Background(), Job{Type: "sync"}, func(ctx context.Context) error {
		return fmt.Errorf("attempt %d: %w", Attempt(ctx), errFlaky)
	})
	require.NoError(t, err)
	for _, at := range []time.Duration{time.Second, 3 * time.Second, 6 * time.Second} { // waits 1, 2, 3 (capped)
		<-tt.sig.Retried
		tt.set(at)
	}
	err = always.Wait(context.Background())
	require.ErrorIs(t, err, errFlaky)
	assert.EqualError(t, err, "attempt 4: flaky", "the last attempt's error")
	assert.Len(t, always.Attempts(), 4)

	calls := 0
	permanent, err := tt.s.Submit(context.Background(), Job{Type: "sync"}, func(context.Context) error {
		calls++
		return Permanent(errFlaky)
	})
	require.NoError(t, err)
	err = permanent.Wait(context.Background())
	require.ErrorIs(t, err, ErrPermanent)
	require.ErrorIs(t, err, errFlaky)
	assert.Equal(t, 1, calls)
	st := tt.s.Stats()
	assert.EqualValues(t, 3, st.Retries)
	assert.EqualValues(t, 2, st.Failed)
}

// RunSync retries on the caller's goroutine and returns the last error.
func TestRetryRunSync(t *testing.T) {
	tt := newTimeTest(t, Config{Types: map[string]TypeConfig{
		"call": {Retry: RetryPolicy{Attempts: 2, Backoff: time.Second}},
	}})
	done := make(chan error)
	var seen []int
	go func() {
		done <- tt.s.RunSync(context.Background(), Job{Type: "call"}, func(ctx context.Context) error {
			seen = append(seen, Attempt(ctx))
			return errFlaky
		})
	}()
	<-tt.sig.Retried
	tt.set(time.Second)
	require.ErrorIs(t, <-done, errFlaky)
	assert.Equal(t, []int{1, 2}, seen)
}

// A job cancelled while it runs is not retried, nor is one whose
// scheduler closes; a job cancelled while it backs off ends at once.
func TestRetryNotAfterCancel(t *testing.T) {
	tt := newTimeTest(t, Config{Types: map[string]TypeConfig{
		"sync": {Retry: RetryPolicy{Attempts: 3, Backoff: time.Second}},
	}})
	started := make(chan struct{})
	h, err := tt.s.Submit(context.Background(), Job{Type: "sync"}, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	require.NoError(t, err)
	<-started
	h.Cancel()
	require.ErrorIs(t, h.Wait(context.Background()), context.Canceled)
	assert.Zero(t, tt.s.Stats().Retries)

	backingOff, err := tt.s.Submit(context.Background(), Job{Type: "sync"}, func(context.Context) error { return errFlaky })
	require.NoError(t, err)
	<-tt.sig.Retried
	backingOff.Cancel()
	require.ErrorIs(t, backingOff.Wait(context.Background()), context.Canceled)
	require.Len(t, backingOff.Attempts(), 1)
}

// A start deadline bounds the retries: a job whose next attempt cannot
// start by it ends with ErrStartDeadline wrapping its last error.
func TestRetryBoundedByStartDeadline(t *testing.T) {
	tt := newTimeTest(t, Config{Types: map[string]TypeConfig{
		"dispatch": {StartTimeout: 5 * time.Second, Retry: RetryPolicy{Attempts: 10, Backoff: 2 * time.Second}},
	}})
	h, err := tt.s.Submit(context.Background(), Job{Type: "dispatch"}, func(context.Context) error { return errFlaky })
	require.NoError(t, err)
	<-tt.sig.Retried
	tt.set(2 * time.Second) // attempt 2 fails; attempt 3 would be at 6 s
	<-tt.sig.Retried
	tt.set(5 * time.Second)
	err = h.Err()
	require.ErrorIs(t, err, ErrStartDeadline)
	require.ErrorIs(t, err, errFlaky)
	assert.Contains(t, err.Error(), "after 2 attempts")
	assert.EqualValues(t, 1, tt.s.Stats().Expired)
}

// Aging continues across retries from the first submission: a job that
// failed and backed off is older than one submitted during its backoff.
func TestRetryKeepsAgingClock(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 1,
		Types: map[string]TypeConfig{"sync": {Retry: RetryPolicy{Attempts: 2, Backoff: time.Second}}},
		Aging: AgingConfig{Interval: time.Second, Step: 10, MaxEffective: 100}})
	g := newGate()
	first := true
	_, err := tt.s.Submit(context.Background(), Job{Type: "sync"}, func(ctx context.Context) error {
		if first {
			first = false
			return errFlaky
		}
		return g.fn(ctx)
	})
	require.NoError(t, err)
	<-tt.sig.Retried
	tt.set(time.Second)
	<-g.entered // attempt 2 holds the slot
	_, err = tt.s.Submit(context.Background(), Job{}, noop)
	require.NoError(t, err)
	tt.set(4 * time.Second)
	for _, ji := range tt.s.Snapshot() {
		if ji.Running {
			assert.Equal(t, tt.at(0), ji.Submitted, "its aging clock runs from its first submission")
			assert.Equal(t, 60, ji.EffectivePriority, "aged 1 s before its second start")
		} else {
			assert.Equal(t, 80, ji.EffectivePriority, "the other aged 3 s")
		}
	}
	close(g.open)
}

// Bad retry policies are configuration errors.
func TestRetryPolicyValidation(t *testing.T) {
	for _, tc := range []struct {
		p    RetryPolicy
		want string
	}{
		{RetryPolicy{Attempts: -1}, "Retry.Attempts is -1"},
		{RetryPolicy{Attempts: 3}, "Retry.Backoff is 0s; with 3 attempts it must be positive"},
		{RetryPolicy{Attempts: 3, Backoff: -time.Second}, "Retry.Backoff is -1s"},
		{RetryPolicy{MaxBackoff: -1}, "Retry.MaxBackoff is -1ns"},
		{RetryPolicy{Jitter: 1.5}, "Retry.Jitter is 1.5"},
	} {
		_, err := New(Config{Types: map[string]TypeConfig{"x": {Retry: tc.p}}})
		require.ErrorContains(t, err, tc.want)
	}
	s := newTestScheduler(t, Config{Types: map[string]TypeConfig{"x": {Retry: RetryPolicy{Attempts: 2, Backoff: time.Second}}}})
	require.Error(t, s.RegisterType("x", TypeConfig{}), "a type re-registered with another policy")
	require.NoError(t, s.RegisterType("x", TypeConfig{Retry: RetryPolicy{Attempts: 2, Backoff: time.Second}}))
	assert.Zero(t, Attempt(context.Background()), "not a job's context")
}

// Jitter takes up to its part off each wait, at random.
func TestRetryJitter(t *testing.T) {
	p := RetryPolicy{Attempts: 10, Backoff: time.Second, Jitter: 0.5}
	for range 1000 {
		if w := rt.RetryPolicy(p).Wait(3); w < 2*time.Second || w > 4*time.Second {
			t.Fatalf("wait after attempt 3 is %v, want within [2s, 4s]", w)
		}
	}
	assert.Equal(t, 4*time.Second, rt.RetryPolicy{Backoff: time.Second}.Wait(3))
}
