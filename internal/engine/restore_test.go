package engine

import "testing"

// A job restored from a store (Times.Submitted) keeps the aging clock it
// had, whether it was past its grace period, within it, or backing off
// before a retry, and no admission limit refuses it.
func TestRestoredJobKeepsItsAgingClock(t *testing.T) {
	const s = int64(1e6)
	e := newTestEngine(t, Config{MaxConcurrency: 1, MaxQueue: 2,
		Aging: Aging{GracePeriod: 2 * s, Interval: s, Step: 10, MaxEffective: 100}})
	now := 100 * s
	holder := new(Job)
	e.Enqueue(holder, &Desc{Type: "t"}, nil, now)
	fresh := new(Job)
	e.Enqueue(fresh, &Desc{Type: "t", Priority: 50}, nil, now)
	old := new(Job) // submitted 7 s ago: 5 s past its grace, +50
	if r := e.Enqueue(old, &Desc{Type: "t", Priority: 30}, &Times{Submitted: now - 7*s}, now); r != nil {
		t.Fatalf("restored job refused: %+v", r)
	}
	recent := new(Job) // submitted 1 s ago: 1 s of grace left
	if r := e.Enqueue(recent, &Desc{Type: "t", Priority: 40}, &Times{Submitted: now - s}, now); r != nil {
		t.Fatalf("restored job refused beyond MaxQueue: %+v", r)
	}
	backoff := new(Job) // submitted 20 s ago, retrying in 3 s
	if r := e.Enqueue(backoff, &Desc{Type: "t", Priority: 10}, &Times{Submitted: now - 20*s, NotBefore: now + 3*s}, now); r != nil {
		t.Fatalf("restored job refused: %+v", r)
	}
	if r := e.Enqueue(new(Job), &Desc{Type: "t"}, nil, now); r == nil || r.Reason != RefusedFull {
		t.Fatalf("a new job beyond MaxQueue got %+v, want RefusedFull", r)
	}
	check := func(j *Job, want int, what string) {
		t.Helper()
		if got := e.Effective(j, now); got != want {
			t.Fatalf("%s: effective priority %d at %ds, want %d", what, got, now/s, want)
		}
	}
	check(old, 80, "7 s old")
	check(recent, 40, "in its grace period")
	if backoff.State() != StateDelayed {
		t.Fatalf("the backing-off job is %v, want delayed", backoff.State())
	}
	now += 2 * s
	e.Due(now)
	check(recent, 50, "1 s past its grace")
	now += s
	e.Due(now)
	check(backoff, 100, "released 23 s after its submission: capped")
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
	check(old, 100, "10 s old: capped")
	e.Finish(holder, Completed, now)
	// Capped alike, old was enqueued first; then recent and fresh, equal
	// too: the tie goes to the job enqueued first in this engine, fresh.
	// (A restart restores jobs in their stored order before any new one
	// comes, so there that order is the order of submission.)
	check(recent, 60, "3 s old")
	check(fresh, 60, "3 s old")
	for _, want := range []*Job{old, backoff, fresh, recent} {
		if got := e.Next(now); got != want {
			t.Fatalf("started seq %d, want seq %d", got.Seq(), want.Seq())
		}
		e.Finish(want, Completed, now)
		if err := e.Verify(now); err != nil {
			t.Fatal(err)
		}
	}
}
