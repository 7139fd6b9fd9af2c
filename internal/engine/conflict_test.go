package engine

import "testing"

// TestConflictLockOfTwoHolders: a lock that two running jobs hold (one
// adopted running while the other held it, as only Adopt does) stays
// shut until the last of them ends, whichever ends first, and then its
// waiter starts; the lock is then forgotten as usual.
func TestConflictLockOfTwoHolders(t *testing.T) {
	for _, firstEnds := range []string{"holder", "adopted"} {
		e := newTestEngine(t, Config{})
		if err := e.RegisterType("c", Type{ConflictGroup: "g"}); err != nil {
			t.Fatal(err)
		}
		var now int64
		check := func(what string) {
			t.Helper()
			if err := e.Verify(now); err != nil {
				t.Fatalf("%s, %s: %v", firstEnds, what, err)
			}
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
