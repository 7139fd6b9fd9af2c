package engine

import "testing"

// newConflictEngine returns a test engine with a type "c" of conflict
// group "g".
func newConflictEngine(t *testing.T) *Engine {
	t.Helper()
	e := newTestEngine(t, Config{})
	if err := e.RegisterType("c", Type{ConflictGroup: "g"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// mustVerify fails t, saying what was done, if e's invariants do not hold
// at now.
func mustVerify(t *testing.T, e *Engine, now int64, what string) {
	t.Helper()
	if err := e.Verify(now); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestConflictLockOfTwoHolders: a lock that two running jobs hold (one
// adopted running while the other held it, as only Adopt does) stays
// shut until the last of them ends, whichever ends first, and then its
// waiter starts; the lock is then forgotten as usual.
func TestConflictLockOfTwoHolders(t *testing.T) {
	for _, firstEnds := range []string{"holder", "adopted"} {
		e := newConflictEngine(t)
		var now int64
		check := func(what string) {
			t.Helper()
			mustVerify(t, e, now, firstEnds+", "+what)
		}
		holder, adopted, waiter := new(Job), new(Job), new(Job)
		e.Enqueue(holder, &Desc{Type: "c", ID: "x"}, nil, now)
		e.Enqueue(adopted, &Desc{Type: "c", ID: "x"}, nil, now)
		// Started past the lock its type's conflict holds, as Adopt does.
		adopted.set(flagAdopted, true)
		e.start(adopted, Fair, now)
		check("two holders")
		e.Enqueue(waiter, &Desc{Type: "c", ID: "x"}, nil, now)
		if e.Next(now) != nil || waiter.Running() || e.WhyWaiting(waiter).Why != WhyConflict {
			t.Fatalf("%s: the waiter started past a held lock", firstEnds)
		}
		check("a waiter")
		first, second := holder, adopted
		if firstEnds == "adopted" {
			first, second = adopted, holder
		}
		now++
		e.Finish(first, Completed, now)
		check("one holder ended")
		if e.Next(now) != nil || waiter.Running() {
			t.Fatalf("%s: the waiter started with the lock still held by job %d", firstEnds, second.Seq())
		}
		if on := e.WhyWaiting(waiter).On; on != second.Seq() {
			t.Fatalf("%s: the waiter waits on job %d, want %d", firstEnds, on, second.Seq())
		}
		now++
		e.Finish(second, Completed, now)
		if e.Next(now) != waiter {
			t.Fatalf("%s: the waiter did not start once both holders ended", firstEnds)
		}
		check("the waiter runs")
		e.Finish(waiter, Completed, now)
		check("all ended")
		if len(e.conflicts) != 0 {
			t.Fatalf("%s: %d locks kept", firstEnds, len(e.conflicts))
		}
	}
}

// TestConflictLockReused: the lock an end lets go serves the next lock
// made, of another ID, as a lock of its own: shut by its holder, holding
// its waiter, and let go again at its end. A lock with waiters is not let
// go.
func TestConflictLockReused(t *testing.T) {
	e := newConflictEngine(t)
	var now int64
	check := func(what string) {
		t.Helper()
		mustVerify(t, e, now, what)
	}
	run := func(id string) *Job {
		t.Helper()
		j := new(Job)
		if r := e.Enqueue(j, &Desc{Type: "c", ID: id}, nil, now); r != nil {
			t.Fatalf("job of %s refused: %v", id, r.Reason)
		}
		if !j.Running() && e.Next(now) != j { // Enqueue starts a job that can start at once
			t.Fatalf("job of %s did not start", id)
		}
		return j
	}
	x := run("x")
	lx := e.conflicts[conflictKey{"g", "x"}]
	e.Finish(x, Completed, now)
	if e.spareLock != lx || len(e.conflicts) != 0 {
		t.Fatalf("the lock let go is not kept apart: spare %p, want %p; %d locks", e.spareLock, lx, len(e.conflicts))
	}
	check("x ended")

	y := run("y")
	if ly := e.conflicts[conflictKey{"g", "y"}]; ly != lx || e.spareLock != nil || !ly.shut || ly.holder != y || ly.key.id != "y" {
		t.Fatalf("y's lock: %p (x's was %p), spare %p, shut %v, holder %v, key %v", ly, lx, e.spareLock, ly.shut, ly.holder == y, ly.key)
	}
	waiter := new(Job)
	e.Enqueue(waiter, &Desc{Type: "c", ID: "y"}, nil, now)
	if e.Next(now) != nil || e.WhyWaiting(waiter).Why != WhyConflict {
		t.Fatal("the waiter started past y's lock")
	}
	check("a waiter on y")
	now++
	e.Finish(y, Completed, now)
	if e.spareLock != nil {
		t.Fatal("a lock with a waiter was let go")
	}
	if e.Next(now) != waiter {
		t.Fatal("the waiter did not start once y ended")
	}
	check("the waiter runs")
	e.Finish(waiter, Completed, now)
	check("all ended")
	if e.spareLock != lx || len(e.conflicts) != 0 {
		t.Fatalf("spare %p, want %p; %d locks kept", e.spareLock, lx, len(e.conflicts))
	}
}
