package engine

import (
	"slices"
	"testing"
)

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

// A job restored under a pause that began before the restart
// (PauseKeySince) has its aging clock stand still from when the pause
// began, or from its submission, or the end of the attempt it backs off
// from, if that came later: queued, backing off, or waiting for a job it
// runs after. When a pause moves a job's
// submission time on, ClockMoved hears of it.
func TestRestoredPausedJobKeepsItsStoppedClock(t *testing.T) {
	const s = int64(1e6)
	e := newTestEngine(t, Config{MaxConcurrency: 1, Aging: Aging{Interval: s, Step: 1, MaxEffective: 100}})
	var moved []*Job
	e.ClockMoved = func(j *Job) { moved = append(moved, j) }
	now := 100 * s
	e.PauseKeySince("k", 60*s, now) // paused 40 s before the restart
	queued := new(Job)              // submitted at 50 s: waited 10 s
	e.Enqueue(queued, &Desc{Type: "t", Key: "k"}, &Times{Submitted: 50 * s}, now)
	late := new(Job) // submitted at 70 s, during the pause: waited 0 s
	e.Enqueue(late, &Desc{Type: "t", Key: "k"}, &Times{Submitted: 70 * s}, now)
	backoff := new(Job) // submitted at 40 s, backing off until 110 s: waited 20 s
	e.Enqueue(backoff, &Desc{Type: "t", Key: "k"}, &Times{Submitted: 40 * s, NotBefore: 110 * s}, now)
	ranLate := new(Job) // submitted at 40 s, its attempt ended at 80 s, backing off: waited 40 s
	e.Enqueue(ranLate, &Desc{Type: "t", Key: "k"}, &Times{Submitted: 40 * s, Ran: true, AttemptEnded: 80 * s, NotBefore: 110 * s}, now)
	holder := new(Job)
	e.Enqueue(holder, &Desc{Type: "t"}, nil, now) // holds the slot
	blocked := new(Job)                           // submitted at 30 s, runs after holder: waited 30 s
	e.Enqueue(blocked, &Desc{Type: "t", Key: "k"}, &Times{Submitted: 30 * s, After: []*Job{holder}}, now)
	check := func(j *Job, want int, what string) {
		t.Helper()
		if got := e.Effective(j, now); got != want {
			t.Fatalf("%s: effective priority %d at %ds, want %d", what, got, now/s, want)
		}
	}
	check(queued, 60, "paused since 60 s: base 50, 10 s waited")
	check(late, 50, "submitted during the pause")

	now = 120 * s
	e.Due(now)
	e.ResumeKey("k", now)
	if backoff.State() != StateQueued {
		t.Fatalf("the backing-off job is %v, want queued", backoff.State())
	}
	now = 125 * s
	check(queued, 65, "5 s after the resume")
	check(late, 55, "5 s after the resume")
	check(backoff, 75, "5 s after the resume")
	check(ranLate, 95, "5 s after the resume")
	e.Finish(holder, Completed, now) // blocked joins the queue
	check(blocked, 85, "5 s after the resume")
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
	for _, j := range []*Job{queued, late, backoff, ranLate, blocked} {
		if !slices.Contains(moved, j) {
			t.Errorf("ClockMoved did not hear of job %d", j.Seq())
		}
	}
}

// A job set aside with its aging clock running keeps its lane's paused
// time as it left (AsideStood), and its lane reports what it has stood
// since (Stoods): their difference is the time a restart must move its
// submission on by. A lane given its value back (RestoreStood) goes on
// from it; a lane made afresh counts from when it is made, never below a
// value kept of one forgotten.
func TestAsideStoodAcrossRestart(t *testing.T) {
	const s = int64(1e6)
	cfg := Config{MaxConcurrency: 1, Aging: Aging{Interval: s, Step: 1, MaxEffective: 100}}
	start := func(e *Engine, j *Job, now int64) { // Enqueue may have started it
		t.Helper()
		if j.State() != StateRunning && e.Next(now) != j {
			t.Fatalf("job %d did not start", j.Seq())
		}
	}
	e := newTestEngine(t, cfg)
	j := new(Job)
	if r := e.Enqueue(j, &Desc{Type: "t", Key: "k"}, nil, s); r != nil {
		t.Fatalf("refused: %+v", r)
	}
	start(e, j, s)
	e.Retry(j, 1000*s, 2*s)
	at, ok := e.AsideStood(j)
	if !ok {
		t.Fatal("a backing-off job is not set aside with its clock running")
	}
	e.PauseKey("k", 10*s)
	e.ResumeKey("k", 30*s)
	var lanes []LaneStood
	e.Stoods(func(l LaneStood) { lanes = append(lanes, l) })
	if len(lanes) != 1 || lanes[0].Key != "k" || lanes[0].Type != "t" || lanes[0].Stood-at != 20*s {
		t.Fatalf("Stoods = %+v, want lane k/t 20 s past the job's %d", lanes, at)
	}

	// The restart, at 50 s: the job moved on by the 20 s, its lane's
	// value given back.
	r := newTestEngine(t, cfg)
	r.RestoreStood(lanes[0])
	j2 := new(Job)
	r.Enqueue(j2, &Desc{Type: "t", Key: "k"}, &Times{Submitted: 21 * s, NotBefore: 1000 * s, Ran: true, AttemptEnded: 2 * s}, 50*s)
	if at2, ok := r.AsideStood(j2); !ok || at2 != lanes[0].Stood {
		t.Fatalf("restored: AsideStood = %d, %v; want its lane's restored %d", at2, ok, lanes[0].Stood)
	}
	r.PauseKey("k", 60*s)
	r.ResumeKey("k", 70*s)
	r.Stoods(func(l LaneStood) {
		if l.Stood-lanes[0].Stood != 10*s {
			t.Fatalf("restored lane stood %d past its restored value, want 10 s", l.Stood-lanes[0].Stood)
		}
	})

	// A fresh lane, made after its key was forgotten, counts from then.
	f := newTestEngine(t, cfg)
	g := new(Job)
	f.Enqueue(g, &Desc{Type: "t", Key: "k"}, nil, s)
	start(f, g, s)
	f.PauseKey("k", 2*s)
	f.ResumeKey("k", 6*s)
	var old int64
	f.Stoods(func(l LaneStood) { old = l.Stood })
	f.Finish(g, Completed, 7*s)
	now := 7*s + 2*cfg.IdleTTL + 2*600e6
	o := new(Job)
	f.Enqueue(o, &Desc{Type: "t", Key: "other"}, nil, now) // forgets the idle key k
	if f.Summary().KeysForgotten == 0 {
		t.Fatal("key k was not forgotten")
	}
	start(f, o, now)
	f.Finish(o, Completed, now)
	h := new(Job)
	f.Enqueue(h, &Desc{Type: "t", Key: "k"}, nil, now)
	start(f, h, now)
	f.Retry(h, now+1000*s, now)
	if at, _ := f.AsideStood(h); at < old {
		t.Fatalf("a new lane's value %d is below the forgotten one's %d", at, old)
	}
}
