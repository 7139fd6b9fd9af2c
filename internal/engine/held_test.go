package engine

import (
	"strings"
	"testing"
)

// counting is an Observer that counts what it is told.
type counting struct{ submitted, started, finished, cancelled int }

func (c *counting) Submitted(*Job, int64)                                               { c.submitted++ }
func (c *counting) Started(*Job, int, bool, int64)                                      { c.started++ }
func (c *counting) Finished(*Job, Outcome, int64)                                       { c.finished++ }
func (c *counting) Cancelled(*Job, int64)                                               { c.cancelled++ }
func (c *counting) Expired(*Job, int64)                                                 {}
func (c *counting) DependencyFailed(_, _ *Job, _ int64)                                 {}
func (c *counting) Retrying(*Job, int64, int64)                                         {}
func (c *counting) AllocationChanged(string, float64, float64, AllocationReason, int64) {}

// TestHeldRecordLife: a held record has the identity Enqueue would give
// it, a sequence number from the same counter, and follows StartHeld,
// RequeueHeld and EndHeld; it takes no slot, counts in no figure, is not
// told to the observer, and keeps the engine from being idle until it
// ends.
func TestHeldRecordLife(t *testing.T) {
	obs := new(counting)
	e := New(Config{MaxConcurrency: 1, MaxQueue: 1, CostAlpha: 1, DefaultCost: 1, IdleTTL: 1e9,
		DefaultKey: Key{MaxConcurrency: 1, MaxPending: 1}}, obs)
	if err := e.RegisterType("u", Type{Tier: 2, DefaultPriority: 70}); err != nil {
		t.Fatal(err)
	}
	var now int64 = 10
	check := func(what string) {
		t.Helper()
		if err := e.Verify(now); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	first := new(Job)
	e.Enqueue(first, &Desc{Type: "u", Key: "k"}, nil, now) // runs: the slot, and key k's cap, are taken
	queued := new(Job)
	e.Enqueue(queued, &Desc{Type: "u", Key: "other"}, nil, now) // waits: MaxQueue is now full
	sum := e.Summary()

	now = 20
	h := new(Job)
	if r := e.Hold(h, &Desc{Type: "u", ID: "x", Key: "k"}, now); r != nil {
		t.Fatalf("Hold refused past MaxQueue and the key's MaxPending: %+v", r)
	}
	check("held")
	if h.Type() != "u" || h.Key() != "k" || h.ID() != "x" || h.Tier() != 2 || h.Base() != 70 ||
		h.Seq() != 3 || h.Submitted() != 20 || h.Engine() != e {
		t.Fatalf("held record: type %q key %q id %q tier %d base %d seq %d submitted %d",
			h.Type(), h.Key(), h.ID(), h.Tier(), h.Base(), h.Seq(), h.Submitted())
	}
	if h.State() != StateElsewhere || h.Running() || h.Waiting() || !h.Elsewhere() {
		t.Fatalf("held record: state %d running %v waiting %v elsewhere %v", h.State(), h.Running(), h.Waiting(), h.Elsewhere())
	}
	p := new(Job)
	e.Hold(p, &Desc{Type: "u", Priority: 150}, now)
	if p.Base() != 100 || p.Seq() != 4 || p.Key() != "" {
		t.Fatalf("second held record: base %d seq %d key %q", p.Base(), p.Seq(), p.Key())
	}
	next := new(Job)
	e.Enqueue(next, &Desc{Type: "u", Key: "third"}, &Times{Submitted: now}, now) // restored: past MaxQueue
	if next.Seq() != 5 {
		t.Fatalf("the job enqueued after two held records has seq %d, want 5", next.Seq())
	}
	if got := e.Summary(); got.Running != sum.Running || got.Pending != sum.Pending+1 || got.Submitted != sum.Submitted+1 {
		t.Fatalf("held records counted: %+v, before them %+v", got, sum)
	}
	if obs.submitted != 3 || e.Elsewhere() != 2 {
		t.Fatalf("observer told of %d submissions, want 3 (none held); %d held records", obs.submitted, e.Elsewhere())
	}

	// Granted elsewhere: it runs, in no count here, and holds nothing.
	now = 30
	e.StartHeld(h, now)
	check("started elsewhere")
	if !h.Running() || h.Started() != 30 || h.State() != StateRunning || e.Running() != 1 {
		t.Fatalf("held record running %v started %d; engine running %d", h.Running(), h.Started(), e.Running())
	}
	if e.FindRunning(func(j *Job) bool { return j == h }) != nil || e.Find(h.Seq()) != nil {
		t.Fatal("a held record is among the running jobs")
	}
	e.Finish(first, Completed, now)
	if j := e.Next(now); j != queued {
		t.Fatalf("the slot went to %v, want the queued job", j)
	}
	k2 := new(Job) // key k's cap is 1, and its held record running counts nowhere
	e.Enqueue(k2, &Desc{Type: "u", Key: "k"}, &Times{Submitted: now}, now)
	e.Finish(queued, Completed, now)
	if e.Next(now) != next || e.Next(now) != nil {
		t.Fatal("the order")
	}
	e.Finish(next, Completed, now)
	if e.Next(now) != k2 {
		t.Fatal("key k's job did not start with only a held record of k running")
	}
	check("after the order")

	// Its attempt ended: it waits elsewhere again, and then ends.
	now = 40
	e.RequeueHeld(h)
	check("requeued")
	if h.State() != StateElsewhere || h.Running() || h.Started() != 30 {
		t.Fatalf("requeued: state %d running %v started %d", h.State(), h.Running(), h.Started())
	}
	e.Finish(k2, Completed, now)
	e.EndHeld(p, NotRun, now)
	if e.Idle() {
		t.Fatal("idle with a held record waiting elsewhere")
	}
	e.StartHeld(h, 50)
	if e.Idle() {
		t.Fatal("idle with a held record running elsewhere")
	}
	e.EndHeld(h, Completed, 60)
	check("ended")
	if !e.Idle() || h.State() != StateDone || h.Outcome() != Completed || h.Elsewhere() || p.Outcome() != NotRun {
		t.Fatalf("idle %v; ended: state %d outcome %d elsewhere %v", e.Idle(), h.State(), h.Outcome(), h.Elsewhere())
	}
	c := e.Summary().Counters
	if c.Submitted != 4 || c.Completed != 4 || c.Cancelled != 0 || obs.finished != 4 || obs.cancelled != 0 {
		t.Fatalf("counters %+v, observer %+v: the held records counted", c, obs)
	}
}

// TestHoldRefuses: a held record is refused for an unknown type and once
// the engine stops accepting, counted as Enqueue counts those, and for
// nothing else.
func TestHoldRefuses(t *testing.T) {
	e := newTestEngine(t, Config{})
	if r := e.Hold(new(Job), &Desc{Type: "nope"}, 0); r == nil || r.Reason != RefusedUnknownType {
		t.Fatalf("unknown type: %+v", r)
	}
	if n := e.Summary().RejectedUnknownType; n != 1 {
		t.Fatalf("RejectedUnknownType %d, want 1", n)
	}
	e.StopAccepting()
	if r := e.Hold(new(Job), &Desc{Type: "t"}, 0); r == nil || r.Reason != RefusedClosed {
		t.Fatalf("closing: %+v", r)
	}
	for _, ti := range e.Types() {
		if ti.Name == "t" && ti.RejectedClosed != 1 {
			t.Fatalf("type t: RejectedClosed %d, want 1", ti.RejectedClosed)
		}
	}
	if err := e.Verify(0); err != nil {
		t.Fatal(err)
	}
	if e.Elsewhere() != 0 || !e.Idle() {
		t.Fatalf("a refused record is kept: %d", e.Elsewhere())
	}
}

// TestHeldRecordOfAForgottenKey: a key with nothing but held records is
// idle and forgotten after IdleTTL; its records keep their type and key,
// and neither the forgotten lane nor the key's new record is disturbed.
func TestHeldRecordOfAForgottenKey(t *testing.T) {
	e := newTestEngine(t, Config{IdleTTL: 100})
	var now int64
	h := new(Job)
	e.Hold(h, &Desc{Type: "t", Key: "a"}, now)
	if k := e.keys["a"]; k == nil || !k.idle {
		t.Fatalf("the key of a held record alone is not idle: %+v", k)
	}
	now = 100
	e.StartHeld(h, now)
	e.Enqueue(new(Job), &Desc{Type: "t", Key: "b"}, nil, now) // forgets a
	if e.keys["a"] != nil || e.Summary().KeysForgotten != 1 {
		t.Fatalf("key a kept: %d forgotten", e.Summary().KeysForgotten)
	}
	again := new(Job)
	e.Enqueue(again, &Desc{Type: "t", Key: "a"}, nil, now) // a brand-new record of a
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
	if h.Key() != "a" || h.Type() != "t" || !h.Running() || again.lane == h.lane {
		t.Fatalf("held record of the forgotten key: key %q type %q running %v, same lane as the new job %v",
			h.Key(), h.Type(), h.Running(), again.lane == h.lane)
	}
	e.EndHeld(h, Failed, now)
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
	// A key with work is not made idle by a held record of it.
	e.Hold(new(Job), &Desc{Type: "t", Key: "a"}, now)
	if e.keys["a"].idle {
		t.Fatal("a held record made a busy key idle")
	}
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
}

// TestHeldRecordMisuse: Cancel, Retry and the held methods out of turn
// panic rather than corrupt the engine.
func TestHeldRecordMisuse(t *testing.T) {
	e := newTestEngine(t, Config{})
	h := new(Job)
	e.Hold(h, &Desc{Type: "t"}, 0)
	queued := new(Job)
	e.Enqueue(queued, &Desc{Type: "t"}, nil, 0) // runs
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Cancel", func() { e.Cancel(h, 0) }},
		{"RequeueHeld", func() { e.RequeueHeld(h) }},
		{"StartHeld", func() { e.StartHeld(queued, 0) }},
		{"EndHeld", func() { e.EndHeld(queued, Completed, 0) }},
		{"Retry", func() { e.StartHeld(h, 0); e.Retry(h, 0, 0) }},
	} {
		func() {
			defer func() {
				if r, _ := recover().(string); !strings.Contains(r, c.name) {
					t.Fatalf("%s: recovered %q", c.name, r)
				}
			}()
			c.f()
		}()
		if err := e.Verify(0); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
}
