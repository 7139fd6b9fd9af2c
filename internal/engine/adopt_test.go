package engine

import (
	"strconv"
	"testing"
)

// TestAdoptStartsAtOnce: an adopted job runs from when it started, is
// counted and told as a job enqueued and started is, is charged its
// estimate as a Fair start, and the cost learnt at its end, and its
// charge, count from its start.
func TestAdoptStartsAtOnce(t *testing.T) {
	obs := new(counting)
	e := New(Config{CostAlpha: 1, DefaultCost: 1, IdleTTL: 1e12}, obs)
	if err := e.RegisterType("t", Type{StartTimeout: 60e6}); err != nil {
		t.Fatal(err)
	}
	var now int64 = 5e6
	j := new(Job)
	if r := e.Adopt(j, &Desc{Type: "t", ID: "x", Key: "k"}, &Times{Submitted: 1e6}, 3e6, now); r != nil {
		t.Fatal(r)
	}
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
	if !j.Running() || !j.Adopted() || j.Started() != 3e6 || j.Submitted() != 1e6 || j.Seq() != 1 || j.Kind() != Fair {
		t.Fatalf("adopted: running %v adopted %v started %d submitted %d seq %d kind %d",
			j.Running(), j.Adopted(), j.Started(), j.Submitted(), j.Seq(), j.Kind())
	}
	if e.Running() != 1 || e.Summary().Submitted != 1 || obs.submitted != 1 || obs.started != 1 {
		t.Fatalf("running %d, submitted %d; observer %+v", e.Running(), e.Summary().Submitted, obs)
	}
	if w := e.Summary().Wait; w.Count != 1 || w.Sum != 2 {
		t.Fatalf("wait recorded %+v, want one of 2 s (started − submitted)", w)
	}
	if v := e.VirtualTimes()[FlowID{"k", 0}]; v != 1 {
		t.Fatalf("V charged %v at the start, want the default cost, 1", v)
	}
	now = 10e6
	e.Finish(j, Completed, now)
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
	if c := e.Estimates()[EstimateID{"t", "x"}]; c != 7 {
		t.Fatalf("cost learnt %v s, want 7 (from its start at 3 s to 10 s)", c)
	}
	if v := e.VirtualTimes()[FlowID{"k", 0}]; v != 7 {
		t.Fatalf("V %v after its end, want the 7 s it ran", v)
	}
	if j.Adopted() || j.State() != StateDone || e.Summary().Completed != 1 || !e.Idle() {
		t.Fatalf("ended: adopted %v state %d", j.Adopted(), j.State())
	}

	// A start after now is taken as now; the start deadline is kept, to
	// bound its retries, without a timer while it runs.
	j2 := new(Job)
	e.Adopt(j2, &Desc{Type: "t"}, nil, now+5, now)
	if j2.Started() != now || j2.Submitted() != now || !j2.Timed() || e.timed[j2].deadlineAt != now+60e6 {
		t.Fatalf("started %d submitted %d, timed %v", j2.Started(), j2.Submitted(), j2.Timed())
	}
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
	// Retried, its next attempt is the order's.
	e.Retry(j2, now+1, now)
	now++
	e.Due(now)
	if e.Next(now) != j2 || j2.Adopted() || j2.Started() != now {
		t.Fatalf("retried: running %v adopted %v started %d", j2.Running(), j2.Adopted(), j2.Started())
	}
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
}

// TestAdoptAboveLimits: adopted jobs start past every kind of limit and
// count against it, and the order then starts nothing that limit holds
// until enough of them end: the waiter starts exactly at the end named.
// The last row is the same state reached by lowering the global limit
// under jobs the order started, which the engine allowed before Adopt.
func TestAdoptAboveLimits(t *testing.T) {
	for _, c := range []struct {
		name        string
		cfg         Config
		typ         Type
		setup       func(*Engine)
		waiter      string // the waiter's key; the adopted jobs' is "a"
		tm          Times  // the adopted jobs' and the waiter's times
		startsAfter int    // ends of adopted jobs after which the waiter starts
		lowered     bool
	}{
		{name: "global", cfg: Config{MaxConcurrency: 2}, waiter: "b", startsAfter: 2},
		{name: "tier", cfg: Config{TierLimits: map[int]int{0: 2}}, waiter: "b", startsAfter: 2},
		{name: "type", typ: Type{MaxConcurrency: 2}, waiter: "b", startsAfter: 2},
		{name: "key", cfg: Config{Keys: map[string]Key{"a": {MaxConcurrency: 2}}}, waiter: "a", startsAfter: 2},
		{name: "conflict", typ: Type{ConflictGroup: "g"}, waiter: "b", startsAfter: 3},
		{name: "resource", cfg: Config{Resources: map[string]int{"r": 2}}, typ: Type{Needs: []Need{{"r", 1}}},
			waiter: "b", startsAfter: 2},
		{name: "replica", setup: func(e *Engine) { e.SetReplica("p", 2, nil, 0) }, waiter: "b",
			tm: Times{Replica: "p"}, startsAfter: 2},
		// Bound to none, the third finds p full and runs on none: the
		// first end frees a slot on p.
		{name: "replica, unbound", setup: func(e *Engine) { e.SetReplica("p", 2, nil, 0) }, waiter: "b", startsAfter: 1},
		{name: "global, lowered", cfg: Config{MaxConcurrency: 3}, waiter: "b", startsAfter: 2, lowered: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEngine(t, c.cfg)
			if err := e.RegisterType("x", c.typ); err != nil {
				t.Fatal(err)
			}
			if c.setup != nil {
				c.setup(e)
			}
			var now int64
			check := func(what string) {
				t.Helper()
				if err := e.Verify(now); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			var adopted []*Job
			for i := 0; i < 3; i++ {
				j := new(Job)
				tm := c.tm
				d := &Desc{Type: "x", ID: "same", Key: "a"}
				if c.lowered {
					e.Enqueue(j, d, &tm, now)
				} else if r := e.Adopt(j, d, &tm, now, now); r != nil {
					t.Fatal(r)
				}
				if !j.Running() {
					t.Fatalf("job %d not running", i)
				}
				adopted = append(adopted, j)
				check("adopted " + strconv.Itoa(i))
			}
			if c.lowered {
				e.SetMaxConcurrency(2, now)
			}
			waiter := new(Job)
			tm := c.tm
			e.Enqueue(waiter, &Desc{Type: "x", ID: "same", Key: c.waiter}, &tm, now)
			check("waiter")
			if waiter.Running() || e.Next(now) != nil {
				t.Fatal("the waiter started past the limit")
			}
			for i, j := range adopted {
				now++
				e.Finish(j, Completed, now)
				check("end " + strconv.Itoa(i+1))
				got := e.Next(now)
				switch {
				case i+1 < c.startsAfter && got != nil:
					t.Fatalf("after %d ends, job %d started; want the waiter after %d", i+1, got.Seq(), c.startsAfter)
				case i+1 == c.startsAfter && got != waiter:
					t.Fatalf("after %d ends, %v started, want the waiter", i+1, got)
				}
				check("next " + strconv.Itoa(i+1))
			}
			if !waiter.Running() {
				t.Fatal("the waiter never started")
			}
		})
	}
}

// TestAdoptIgnoresAdmissionAndTokens: admission limits full, a paused key
// and an empty token bucket hold no adopted job, and it takes no token:
// the next token is due when the order's start alone makes it due.
func TestAdoptIgnoresAdmissionAndTokens(t *testing.T) {
	e := newTestEngine(t, Config{MaxQueue: 1, DefaultKey: Key{MaxPending: 1}})
	if err := e.RegisterType("r", Type{Rate: Rate{Period: 1e6, Burst: 1}}); err != nil {
		t.Fatal(err)
	}
	var now int64
	check := func(what string) {
		t.Helper()
		if err := e.Verify(now); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	e.PauseKey("a", now)
	e.Enqueue(new(Job), &Desc{Type: "t", Key: "a"}, nil, now) // paused: fills MaxQueue and a's MaxPending
	adopted := new(Job)
	if r := e.Adopt(adopted, &Desc{Type: "r", Key: "a"}, nil, now, now); r != nil || !adopted.Running() {
		t.Fatalf("refused %+v, or not running", r)
	}
	check("adopted in a paused key")
	e.ResumeKey("a", now)
	e.Cancel(e.PendingJobs()[0], now)
	j := new(Job)
	e.Enqueue(j, &Desc{Type: "r"}, nil, now)
	if !j.Running() {
		t.Fatal("the adopted job took the type's token")
	}
	again := new(Job) // the bucket is empty now
	e.Adopt(again, &Desc{Type: "r"}, nil, now, now)
	waiter := new(Job)
	e.Enqueue(waiter, &Desc{Type: "r"}, nil, now)
	check("the bucket empty")
	if !again.Running() || waiter.Running() {
		t.Fatalf("adopted running %v; waiter running %v past the rate limit", again.Running(), waiter.Running())
	}
	if at, ok := e.NextDue(); !ok || at != 1e6 {
		t.Fatalf("next token due at %d (%v), want 1e6: one token taken", at, ok)
	}
}

// TestAdoptRefuses: only an unknown type, a closing engine, an unknown
// resource or too many units refuse an adopted job, and a refusal
// changes nothing but its count.
func TestAdoptRefuses(t *testing.T) {
	e := newTestEngine(t, Config{Resources: map[string]int{"r": 2}})
	for _, c := range []struct {
		d    Desc
		tm   Times
		want RefusalReason
	}{
		{Desc{Type: "nope"}, Times{}, RefusedUnknownType},
		{Desc{Type: "t"}, Times{Needs: []Need{{"s", 1}}}, RefusedUnknownResource},
		{Desc{Type: "t"}, Times{Needs: []Need{{"r", 3}}}, RefusedTooMuch},
	} {
		if r := e.Adopt(new(Job), &c.d, &c.tm, 0, 0); r == nil || r.Reason != c.want {
			t.Fatalf("%+v: refusal %+v, want %d", c, r, c.want)
		}
	}
	e.StopAccepting()
	if r := e.Adopt(new(Job), &Desc{Type: "t"}, nil, 0, 0); r == nil || r.Reason != RefusedClosed {
		t.Fatalf("closing: %+v", r)
	}
	if s := e.Summary(); s.Submitted != 0 || s.RejectedUnknownType != 1 || !e.Idle() || len(e.keys) != 1 {
		t.Fatalf("after refusals: %+v, %d keys", s, len(e.keys))
	}
	if err := e.Verify(0); err != nil {
		t.Fatal(err)
	}
}

// TestAdoptOnReplicas: an adopted job bound to a replica runs there, full
// or not known, and counts there until it ends; one bound to none takes
// the first free replica, or none.
func TestAdoptOnReplicas(t *testing.T) {
	e := newTestEngine(t, Config{})
	var now int64
	check := func(what string) {
		t.Helper()
		if err := e.Verify(now); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	e.SetReplica("a", 1, nil, now)
	first := new(Job)
	e.Enqueue(first, &Desc{Type: "t"}, &Times{Replica: "a"}, now)
	adopt := func(replica string) *Job {
		t.Helper()
		j := new(Job)
		if r := e.Adopt(j, &Desc{Type: "t"}, &Times{Replica: replica}, now, now); r != nil {
			t.Fatal(r)
		}
		check("adopted on " + replica)
		return j
	}
	full := adopt("a")
	unknown := adopt("z")
	none := adopt("")
	if first.Replica() != "a" || full.Replica() != "a" || unknown.Replica() != "z" || none.Replica() != "" || !none.Running() {
		t.Fatalf("on %q, %q, %q, %q", first.Replica(), full.Replica(), unknown.Replica(), none.Replica())
	}
	if got := e.Replicas(); len(got) != 2 || got[0].Name != "a" || got[0].Running != 2 || got[0].Capacity != 1 ||
		got[1].Name != "z" || got[1].Running != 1 || got[1].Known {
		t.Fatalf("replicas %+v, want a running 2 of 1, z not known running 1", got)
	}
	e.SetReplica("b", 1, nil, now)
	onB := adopt("")
	if onB.Replica() != "b" {
		t.Fatalf("adopted bound to none on %q, want the free b", onB.Replica())
	}
	waiter := new(Job)
	e.Enqueue(waiter, &Desc{Type: "t"}, &Times{Replica: "a"}, now)
	e.Finish(first, Completed, now)
	if e.Next(now) != nil {
		t.Fatal("a job started on a, which still runs its capacity")
	}
	e.Finish(unknown, Completed, now)
	check("z's job ended")
	if len(e.Replicas()) != 2 {
		t.Fatalf("replicas %+v: z kept", e.Replicas())
	}
	e.Finish(full, Completed, now)
	if e.Next(now) != waiter || waiter.Replica() != "a" {
		t.Fatal("the waiter did not start on a once it had a free slot")
	}
	check("the waiter runs")
}

// TestAdoptTakesTheReservation: a key below its reservation takes it with
// an adopted job (Reserved, not charged), as the order would; past it,
// an adopted job is a Fair start, charged.
func TestAdoptTakesTheReservation(t *testing.T) {
	e := newTestEngine(t, Config{Keys: map[string]Key{"k": {MinSlots: 1}}})
	var now int64
	a, b := new(Job), new(Job)
	e.Adopt(a, &Desc{Type: "t", Key: "k"}, nil, now, now)
	e.Adopt(b, &Desc{Type: "t", Key: "k"}, nil, now, now)
	if a.Kind() != Reserved || b.Kind() != Fair {
		t.Fatalf("kinds %d, %d; want Reserved, Fair", a.Kind(), b.Kind())
	}
	if v := e.VirtualTimes()[FlowID{"k", 0}]; v != 1 {
		t.Fatalf("V %v, want the one Fair start's estimate, 1", v)
	}
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
}

// TestAdoptOnPlacesUnbound: a job adopted on a replica runs there, full,
// of a type it does not serve, or not known, and is not bound to it: once
// its attempt ends and it is queued again, the order places it on the
// first free replica that serves its type.
func TestAdoptOnPlacesUnbound(t *testing.T) {
	e := newTestEngine(t, Config{})
	var now int64
	e.SetReplica("a", 1, []string{"t"}, now)
	e.SetReplica("b", 1, []string{"u"}, now)
	j := new(Job)
	if r := e.AdoptOn(j, &Desc{Type: "t"}, nil, "b", now, now); r != nil {
		t.Fatal(r)
	}
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
	if j.Replica() != "b" || j.BoundReplica() != "" {
		t.Fatalf("adopted on %q, bound to %q; want on b, bound to none", j.Replica(), j.BoundReplica())
	}
	other := new(Job)
	if r := e.AdoptOn(other, &Desc{Type: "t"}, nil, "gone", now, now); r != nil || other.Replica() != "gone" {
		t.Fatalf("adopted on a replica not known: %v, on %q", r, other.Replica())
	}
	if got := e.Replicas(); len(got) != 3 || got[1].Name != "b" || got[1].Running != 1 {
		t.Fatalf("replicas %+v, want b running 1", got)
	}
	now = 10
	e.Retry(j, now, now)
	e.Due(now) // its backoff, of none, is over
	if e.Next(now) != j || j.Replica() != "a" {
		t.Fatalf("the retry started on %q, want a: the first free replica serving t", j.Replica())
	}
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
	e.Finish(other, Completed, now)
	if len(e.Replicas()) != 2 {
		t.Fatalf("replicas %+v: the unknown one is forgotten once its job ended", e.Replicas())
	}
}
