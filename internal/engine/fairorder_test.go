package engine

import "testing"

// TestChargeDefersRefiling: a charge that moves a flow on in its order
// leaves its lanes where they are filed in their types' heaps; a lane is
// refiled when it comes to the top, so that a lane filed early never
// stands for its flow ahead of a flow of lower V. A charge that moves a
// flow back refiles its lanes at once.
func TestChargeDefersRefiling(t *testing.T) {
	e := newTestEngine(t, Config{MaxConcurrency: 1})
	if err := e.RegisterType("u", Type{}); err != nil {
		t.Fatal(err)
	}
	var now int64
	enqueue := func(typ, key string) *Job {
		j := new(Job)
		if r := e.Enqueue(j, &Desc{Type: typ, Key: key}, nil, now); r != nil {
			t.Fatalf("%s of %s refused: %v", typ, key, r.Reason)
		}
		return j
	}
	filed := func(l *lane) bool { return l.typ.lanes.KeyOf(l.tyIdx) == l.flow.order() }

	holder := enqueue("t", "h")
	at, au := enqueue("t", "a"), enqueue("u", "a") // a's flow: first in V by its stamp
	bu := enqueue("u", "b")
	mustVerify(t, e, now, "queued")

	now += 1e6 // the holder's estimate, 1 s: its flow's V does not move
	e.Finish(holder, Completed, now)
	if j := e.Next(now); j != at {
		t.Fatalf("started job %d, want a's first (%d)", j.Seq(), at.Seq())
	}
	if filed(au.lane) {
		t.Fatal("a's start refiled a's other lane: want it left where it was")
	}
	mustVerify(t, e, now, "a's first started")

	// b's flow is now first; a's lane of u, filed before a was charged,
	// is still on top of u's heap until it is refiled.
	now += 1e6
	e.Finish(at, Completed, now)
	if j := e.Next(now); j != bu {
		t.Fatalf("started job %d, want b's (%d): a's lane stood for a's flow at its old V", j.Seq(), bu.Seq())
	}
	if !filed(au.lane) {
		t.Fatal("a's lane reached the top of its heap and was not refiled")
	}
	mustVerify(t, e, now, "b's started")

	// b's job ends early: its charge is corrected down, and b's lanes
	// are refiled at once, for a lower V is no bound on the heap's top.
	bt := enqueue("t", "b")
	now += 1e6 / 2
	e.Finish(bu, Completed, now)
	if !filed(bt.lane) {
		t.Fatal("a charge that moved b's flow back left b's lane filed above it")
	}
	mustVerify(t, e, now, "b's ended early")
}

// TestTierFloorRefilesTheLeast: a charge of a learnt estimate moves a
// flow on in its tier's heap of active flows without refiling it; the
// tier's floor, the least settled V, is read once the top is refiled.
func TestTierFloorRefilesTheLeast(t *testing.T) {
	e := newTestEngine(t, Config{MaxConcurrency: 1, CostAlpha: 1})
	var now int64
	enqueue := func(id, key string) *Job {
		j := new(Job)
		if r := e.Enqueue(j, &Desc{Type: "t", ID: id, Key: key}, nil, now); r != nil {
			t.Fatalf("%s of %s refused: %v", id, key, r.Reason)
		}
		return j
	}
	learn := enqueue("big", "z") // runs 10 s: the estimate of "big"
	now += 10e6
	e.Finish(learn, Completed, now)
	tier := learn.lane.flow.tier
	floor := tier.floor

	holder := enqueue("", "h")
	a := enqueue("big", "a") // activated before b: first in the tier's heap at equal V
	b := enqueue("", "b")
	now += 1e6
	e.Finish(holder, Completed, now) // h's flow leaves the tier
	if j := e.Next(now); j != a {
		t.Fatalf("started job %d, want a's (%d)", j.Seq(), a.Seq())
	}
	fa, fb := a.lane.flow, b.lane.flow
	if fa.settled() != floor+10 || fb.settled() != floor {
		t.Fatalf("settled V: a %v, b %v; want %v and %v", fa.settled(), fb.settled(), floor+10, floor)
	}
	if tier.active.KeyOf(fa.actIdx) == fa.settledKey() {
		t.Fatal("a's learnt charge refiled its flow in the tier's heap: want it left where it was")
	}
	mustVerify(t, e, now, "a started")

	// c's flow enters the tier at its floor: the least settled V of the
	// active flows, b's, not a's, which is on top of the heap but filed
	// at its old V.
	c := enqueue("", "c")
	if tier.floor != floor {
		t.Fatalf("tier floor %v after c came, want %v (b's settled V)", tier.floor, floor)
	}
	if c.lane.flow.v != floor {
		t.Fatalf("c's flow starts at V %v, want the floor %v", c.lane.flow.v, floor)
	}
	mustVerify(t, e, now, "c came")

	// a's job ends in half its estimate: its flow, still active, moves
	// back, and is refiled at once.
	enqueue("big", "a")
	now += 5e6
	e.Finish(a, Completed, now)
	if fa.actIdx < 0 || tier.active.KeyOf(fa.actIdx) != fa.settledKey() {
		t.Fatal("a charge that moved a's flow back left it filed above its settled V")
	}
	mustVerify(t, e, now, "a ended early")
}
