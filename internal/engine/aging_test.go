package engine

import "testing"

// TestFixedRankUndoesFixedOrder checks that a lane ranks a fixed-phase job
// from its packed key exactly as from the job: base priority, scaled by
// the interval when aging is on, then submission number.
func TestFixedRankUndoesFixedOrder(t *testing.T) {
	for _, p := range []agingParams{newAgingParams(Aging{}), newAgingParams(Aging{Interval: 5e6, Step: 10, MaxEffective: 100})} {
		for _, base := range []uint8{0, 1, 50, 99, 100} {
			for _, seq := range []uint64{0, 1, 12345, 1<<fixedSeqBits - 1} {
				j := &Job{base: base, seq: seq}
				want := rank{int64(base), seq}
				if p.on {
					want.eff *= p.interval
				}
				if got := p.fixedRank(j.fixedOrder()); got != want {
					t.Errorf("aging %v, base %d, seq %d: rank %+v, want %+v", p.on, base, seq, got, want)
				}
			}
		}
	}
}

// TestUrgentOrderMergesAgedAndFresh: the urgent order is highest score
// first, then oldest, across aged jobs and jobs urgent in their grace
// period (based at or above the threshold). A fresh job of base 100 goes
// before an aged one of score 95, after one of score 105, and after one
// of score 100 that is older; a job in its grace period below the
// threshold is not urgent.
func TestUrgentOrderMergesAgedAndFresh(t *testing.T) {
	const s = int64(1e6)
	e := newTestEngine(t, Config{MaxConcurrency: 1, Aging: Aging{GracePeriod: 10 * s, Interval: s, Step: 1, UrgentThreshold: 90}})
	var now int64
	enqueue := func(base int) *Job {
		j := new(Job)
		if r := e.Enqueue(j, &Desc{Type: "t", Priority: base}, nil, now); r != nil {
			t.Fatalf("refused: %+v", r)
		}
		if err := e.Verify(now); err != nil {
			t.Fatal(err)
		}
		return j
	}
	next := func(running *Job, want *Job, kind Kind) *Job {
		t.Helper()
		e.Finish(running, Completed, now)
		got := e.Next(now)
		if err := e.Verify(now); err != nil {
			t.Fatal(err)
		}
		if got != want || got.Kind() != kind {
			t.Fatalf("at %d s: started job %d (kind %d), want %d (kind %d)", now/s, got.Seq(), got.Kind(), want.Seq(), kind)
		}
		return got
	}
	holder := enqueue(50)
	old := enqueue(85)  // score 85 + (t - 10 s): 95 at 20 s, 105 at 30 s
	old2 := enqueue(80) // 100 at 30 s
	now = 20 * s
	low := enqueue(89) // 89 until 30 s, then rising: 94 at 35 s
	a := enqueue(100)
	if !e.Urgent(a, now) {
		t.Fatalf("a job based at the threshold is not urgent in its grace period")
	}
	running := next(holder, a, Urgent) // 100 > 95
	now = 30 * s
	b := enqueue(100)
	running = next(running, old, Urgent)  // 105 > 100
	running = next(running, old2, Urgent) // 100 = 100, older
	running = next(running, b, Urgent)
	now = 35 * s
	low2 := enqueue(89)
	if e.Urgent(low2, now) {
		t.Fatalf("a job below the threshold is urgent in its grace period")
	}
	running = next(running, low, Urgent) // 94
	next(running, low2, Fair)
}
