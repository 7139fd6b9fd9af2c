package engine

import (
	"strconv"
	"testing"
)

// TestIdleKeyLanesServeOthers: a key that runs out of work keeps its
// lane and offers it; it takes it back when it has work again, and
// another key of the type takes it otherwise, while the job that ended on
// it still names its own key.
func TestIdleKeyLanesServeOthers(t *testing.T) {
	e := newTestEngine(t, Config{MaxConcurrency: 1})
	typ := e.types["t"]
	var now int64
	run := func(key string) *Job {
		j := new(Job)
		e.Enqueue(j, &Desc{Type: "t", Key: key}, nil, now)
		now += 1e6
		e.Finish(j, Completed, now)
		if err := e.Verify(now); err != nil {
			t.Fatal(err)
		}
		return j
	}
	a := run("a")
	lane, ka := a.lane, e.keys["a"]
	if !ka.idle || len(ka.lanes) != 1 || ka.lanes[0] != lane || len(typ.spare) != 1 || lane.spareIdx != 0 {
		t.Fatalf("key a after its job: idle %v, %d lanes, %d spare; want idle, its lane kept and spare", ka.idle, len(ka.lanes), len(typ.spare))
	}
	if again := run("a"); again.lane != lane || len(typ.spare) != 1 || len(typ.all) != 1 {
		t.Fatalf("key a's second job: its own lane %v, %d spare, %d lanes; want its lane, offered again", again.lane == lane, len(typ.spare), len(typ.all))
	}
	b := new(Job)
	e.Enqueue(b, &Desc{Type: "t", Key: "b"}, nil, now)
	if b.lane != lane || len(typ.spare) != 0 || len(typ.all) != 1 || len(ka.lanes) != 0 || len(ka.flows[0].lanes) != 0 {
		t.Fatalf("key b: took a's lane %v; %d spare, %d lanes, a keeps %d", b.lane == lane, len(typ.spare), len(typ.all), len(ka.lanes))
	}
	if a.Key() != "a" || a.Type() != "t" || b.Key() != "b" || lane.key != e.keys["b"] {
		t.Fatalf("a names key %q type %q, b key %q: a lane serves one key at a time", a.Key(), a.Type(), b.Key())
	}
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
}

// TestSpareLanesBounded: when many keys drain at once, their type offers
// no more spare lanes than it has lanes of keys with work, plus
// spareLanes, and lets the others go; the rest go with their keys.
func TestSpareLanesBounded(t *testing.T) {
	const keys = 500
	e := newTestEngine(t, Config{MaxConcurrency: 10})
	typ := e.types["t"]
	var now int64
	for i := range keys {
		e.Enqueue(new(Job), &Desc{Type: "t", Key: strconv.Itoa(i)}, nil, now)
	}
	if len(typ.all) != keys {
		t.Fatalf("%d lanes for %d keys with work", len(typ.all), keys)
	}
	for e.Running() > 0 {
		now += 1000
		e.Finish(e.RunningJobs()[0], Completed, now)
		for e.Next(now) != nil {
		}
		if err := e.Verify(now); err != nil {
			t.Fatal(err)
		}
	}
	// Offered while fewer than the lanes in use plus 64: until the two
	// meet, halfway.
	if want := (keys + spareLanes) / 2; len(typ.all) != want || len(typ.spare) != want {
		t.Fatalf("drained: %d lanes, %d spare; want %d of each", len(typ.all), len(typ.spare), want)
	}
	now += e.cfg.IdleTTL
	e.forget(now)
	if len(typ.all)+len(typ.spare)+len(e.keys) != 1 { // the empty key stays
		t.Fatalf("keys forgotten: %d lanes, %d spare, %d keys left", len(typ.all), len(typ.spare), len(e.keys))
	}
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
}
