package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTimelineModel drives the timeline with random adds, moves, cancels
// and advances of time against a plain list of the timers it should hold:
// popDue must hand out exactly the timers due, earliest first (ties by
// their job's sequence number), next must name the earliest, and the heap
// must stay sound.
func TestTimelineModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	tl := newTimeline()
	var model []*timer // on the timeline, in no order
	var now int64
	less := func(a, b *timer) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return int(a.job.seq) - int(b.job.seq)
	}
	for step := 0; step < 20000; step++ {
		switch op := rng.IntN(10); {
		case op < 4: // a new timer, at now or later
			tm := &timer{idx: -1, job: &Job{seq: uint64(step + 1)}}
			tl.add(tm, now+int64(rng.IntN(50)))
			model = append(model, tm)
		case op < 5 && len(model) > 0: // move one
			tm := model[rng.IntN(len(model))]
			tl.add(tm, now+int64(rng.IntN(50)))
		case op < 6 && len(model) > 0: // cancel one
			i := rng.IntN(len(model))
			tl.cancel(model[i])
			if model[i].idx != -1 {
				t.Fatalf("step %d: a cancelled timer keeps handle %d", step, model[i].idx)
			}
			model = slices.Delete(model, i, i+1)
		default: // time passes; take what is due
			now += int64(rng.IntN(10))
			slices.SortFunc(model, less)
			for {
				got := tl.popDue(now)
				if got == nil {
					break
				}
				if len(model) == 0 || got != model[0] || got.at > now {
					t.Fatalf("step %d: popDue gave a timer at %d, want the earliest of %d due", step, got.at, len(model))
				}
				model = model[1:]
			}
			if len(model) > 0 && model[0].at <= now {
				t.Fatalf("step %d: a timer at %d is due at %d but was not handed out", step, model[0].at, now)
			}
		}
		if !tl.heap.Verify(func(tm *timer) int { return int(tm.idx) }) || tl.heap.Len() != len(model) {
			t.Fatalf("step %d: heap broken or holds %d timers, want %d", step, tl.heap.Len(), len(model))
		}
		at, ok := tl.next()
		if ok != (len(model) > 0) {
			t.Fatalf("step %d: next says %v with %d timers", step, ok, len(model))
		}
		if ok && at != slices.MinFunc(model, less).at {
			t.Fatalf("step %d: next is %d, want %d", step, at, slices.MinFunc(model, less).at)
		}
	}
}

// An engine with nothing to do at a time says so.
func TestNextDueOfAnIdleEngine(t *testing.T) {
	e := newTestEngine(t, Config{})
	if _, ok := e.NextDue(); ok {
		t.Fatal("an engine with no timer has something due")
	}
}
