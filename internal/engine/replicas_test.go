package engine

import (
	"testing"
)

// TestReplicasPack: with replicas known, jobs go to the first replica by
// name with a free slot, a job bound to a full replica does not hold back
// the jobs behind it, a finish frees its replica's slot, and a removed
// replica's running jobs count until they end while the jobs bound to it
// wait.
func TestReplicasPack(t *testing.T) {
	e := newTestEngine(t, Config{})
	if err := e.RegisterType("u", Type{}); err != nil {
		t.Fatal(err)
	}
	var now int64
	check := func() {
		t.Helper()
		if err := e.Verify(now); err != nil {
			t.Fatal(err)
		}
	}
	e.SetReplica("b", 2, nil, now)
	e.SetReplica("a", 1, []string{"t"}, now)
	enqueue := func(d Desc, replica string) *Job {
		t.Helper()
		j := new(Job)
		if r := e.Enqueue(j, &d, &Times{Replica: replica}, now); r != nil {
			t.Fatal(r)
		}
		for e.Next(now) != nil {
		}
		check()
		return j
	}
	j1 := enqueue(Desc{Type: "t"}, "")
	j2 := enqueue(Desc{Type: "u"}, "") // a has no handler for u
	j3 := enqueue(Desc{Type: "t"}, "")
	for _, c := range []struct {
		j    *Job
		want string
	}{{j1, "a"}, {j2, "b"}, {j3, "b"}} {
		if got := c.j.Replica(); got != c.want || !c.j.Running() {
			t.Fatalf("job %d on %q (running %v), want %q", c.j.Seq(), got, c.j.Running(), c.want)
		}
	}
	// Every replica is full: a job bound to a, then one of t, wait; one
	// bound to c, not known, waits for that.
	j4 := enqueue(Desc{Type: "u"}, "a")
	j5 := enqueue(Desc{Type: "t"}, "")
	j6 := enqueue(Desc{Type: "t"}, "c")
	for _, c := range []struct {
		j    *Job
		want Why
	}{{j4, WhyReplicasFull}, {j5, WhyReplicasFull}, {j6, WhyNoReplica}} {
		if got := e.WhyWaiting(c.j).Why; got != c.want {
			t.Fatalf("job %d waits for %d, want %d", c.j.Seq(), got, c.want)
		}
	}
	if n := e.WaitCountsAll(); n[WhyReplicasFull] != 2 || n[WhyNoReplica] != 1 {
		t.Fatalf("wait counts %v", n)
	}
	// A slot frees on b: j5 (of t, which b serves) takes it, not j4.
	e.Finish(j2, Completed, now)
	for e.Next(now) != nil {
	}
	check()
	if !j5.Running() || j5.Replica() != "b" || j4.Running() {
		t.Fatalf("j5 on %q, j4 running %v", j5.Replica(), j4.Running())
	}
	// a removed: j1 still counts there; j4 waits for a replica known.
	e.RemoveReplica("a", now)
	check()
	if got := e.WhyWaiting(j4).Why; got != WhyNoReplica {
		t.Fatalf("j4 waits for %d", got)
	}
	e.SetReplica("a", 2, nil, now)
	for e.Next(now) != nil {
	}
	check()
	if !j4.Running() || j4.Replica() != "a" {
		t.Fatalf("j4 on %q, running %v", j4.Replica(), j4.Running())
	}
	e.SetReplica("c", 1, []string{}, now)
	for e.Next(now) != nil {
	}
	check()
	if !j6.Running() || j6.Replica() != "c" {
		t.Fatalf("j6 on %q, running %v", j6.Replica(), j6.Running())
	}
	for _, j := range []*Job{j1, j3, j4, j5, j6} {
		e.Finish(j, Completed, now)
		check()
	}
	if got := e.Replicas(); len(got) != 3 || got[0].Running+got[1].Running+got[2].Running != 0 {
		t.Fatalf("replicas %+v", got)
	}
}

// TestReplicasWouldStart: WouldStart and EstimateWait know the replicas:
// no free slot on those a job may run on, it would wait, and its wait is
// estimated at their capacity; a job bound to a replica not known, or
// with a slot, as that one says.
func TestReplicasWouldStart(t *testing.T) {
	e := newTestEngine(t, Config{})
	var now int64
	d := &Desc{Type: "t"}
	if !e.WouldStart(d, nil, now) {
		t.Fatal("no replica ever set: it would start")
	}
	e.SetReplica("a", 1, nil, now)
	e.SetReplica("b", 1, []string{}, now) // only jobs bound to it
	j := new(Job)
	e.Enqueue(j, d, nil, now)
	if j.Replica() != "a" {
		t.Fatalf("on %q, want a", j.Replica())
	}
	if e.WouldStart(d, nil, now) {
		t.Fatal("a is full, b has no handler: it would not start")
	}
	if !e.WouldStartOn(d, nil, "b", now) || e.WouldStartOn(d, nil, "c", now) {
		t.Fatal("bound to b it would start, to c not")
	}
	wait, ok := e.EstimateWait(d, now)
	if !ok || wait != 5e5 { // a's running job has half its typical second left
		t.Fatalf("wait %d, %v; want 500000", wait, ok)
	}
	if wait, _ := e.EstimateWaitOn(d, "b", now); wait != 0 {
		t.Fatalf("bound to b: wait %d, want 0", wait)
	}
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
}

// TestReplicasHoldOutOfSight: jobs bound to a full replica are held out
// of sight, so the jobs behind them start elsewhere; a slot freeing on a
// replica that was not full opens nothing; one freeing on theirs lets
// one of them start, and the rest are held again at once.
func TestReplicasHoldOutOfSight(t *testing.T) {
	e := newTestEngine(t, Config{})
	var now int64
	e.SetReplica("a", 1, nil, now)
	e.SetReplica("b", 2, nil, now)
	enqueue := func(replica string) *Job {
		j := new(Job)
		e.Enqueue(j, &Desc{Type: "t"}, &Times{Replica: replica}, now)
		for e.Next(now) != nil {
		}
		return j
	}
	first := enqueue("a")
	for range 1000 {
		enqueue("a")
	}
	if n := e.Summary().Parked; n != 1000 {
		t.Fatalf("%d held, want 1000", n)
	}
	other := enqueue("")
	if other.Replica() != "b" {
		t.Fatalf("the unbound job is on %q, want b", other.Replica())
	}
	e.Finish(other, Completed, now)
	if j := e.Next(now); j != nil || e.Summary().Parked != 1000 {
		t.Fatalf("a slot freed on b: started %v, %d held", j, e.Summary().Parked)
	}
	e.Finish(first, Completed, now)
	if j := e.Next(now); j == nil || j.Replica() != "a" {
		t.Fatalf("a slot freed on a: started %v", j)
	}
	if j := e.Next(now); j != nil || e.Summary().Parked != 999 {
		t.Fatalf("then started %v, %d held", j, e.Summary().Parked)
	}
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
}

// The name "" is no replica: SetReplica refuses it and changes nothing,
// so jobs still start without one.
func TestReplicaNamedNothing(t *testing.T) {
	e := newTestEngine(t, Config{MaxConcurrency: 4})
	if e.SetReplica("", 1, nil, 0) {
		t.Fatal(`SetReplica("") was taken`)
	}
	j := new(Job)
	if r := e.Enqueue(j, &Desc{}, nil, 1); r != nil {
		t.Fatal(r)
	}
	if !j.Running() || j.Replica() != "" {
		t.Fatalf("running %v on %q: with no replica set, a job starts on none", j.Running(), j.Replica())
	}
	if err := e.Verify(1); err != nil {
		t.Fatal(err)
	}
}
