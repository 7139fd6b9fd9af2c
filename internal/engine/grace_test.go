package engine

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fairsched/fairsched/internal/iheap"
)

// TestGraceQueueModel drives the grace queue with random pushes, ends and
// pops, against a plain list of the jobs it should hold. After each step
// its live entries must be the list's, in order, each filed under its own
// number, and the buffer must stay within a constant factor of the most
// jobs it has held. Phases in which an old job holds the front while newer
// ones end within their grace period are the case where holes are all the
// front ever gets.
func TestGraceQueueModel(t *testing.T) {
	p := agingParams{on: true, grace: 1000}
	rng := rand.New(rand.NewPCG(5, 6))
	var q graceQueue
	var model []*Job // the jobs with entries, in push order
	var now int64
	peak := 0
	push := func() *Job {
		j := &Job{sub: now, state: StateQueued}
		q.push(j)
		model = append(model, j)
		return j
	}
	end := func(i int) {
		j := model[i]
		j.state = StateDone
		q.leave(j)
		if j.inGrace {
			t.Fatalf("an ended job keeps inGrace")
		}
		model = slices.Delete(model, i, i+1)
	}
	pop := func() {
		for {
			j := q.popDue(&p, now)
			if j == nil {
				break
			}
			if len(model) == 0 || j != model[0] || j.inGrace {
				t.Fatalf("popDue returned a job out of order, or left it inGrace")
			}
			model = model[1:]
		}
		if len(model) > 0 && p.pastGrace(model[0].sub, now) {
			t.Fatalf("popDue left a due job at the front")
		}
	}
	for step := 0; step < 300000; step++ {
		if step%50000 < 25000 { // random mix, time moving
			switch op := rng.IntN(10); {
			case op < 4:
				push()
			case op < 7 && len(model) > 0:
				end(rng.IntN(len(model)))
			default:
				now += rng.Int64N(40)
				pop()
			}
		} else { // an old job holds the front; new ones end within grace
			if step%50000 == 25000 {
				now += 2 * p.grace
				pop() // everything older is due: the holder is now first
				push()
			}
			push()
			if len(model) > 100 {
				end(1 + rng.IntN(len(model)-1))
			}
			pop()
		}
		peak = max(peak, len(model))
		live := 0
		for i, j := range q.buf[q.head:] {
			if j == nil {
				continue
			}
			if live >= len(model) || model[live] != j || !j.inGrace || j.at != q.base+int64(q.head+i) {
				t.Fatalf("step %d: entry %d is not the model's job %d, or misnumbered", step, i, live)
			}
			live++
		}
		if live != len(model) || len(q.buf)-q.head-live != q.holes {
			t.Fatalf("step %d: %d live entries and %d holes, want %d and %d", step, live, q.holes, len(model), len(q.buf)-q.head-live)
		}
		if len(q.buf)-q.head > 2*peak+64 || q.head > 1025 && 2*(q.head-1) > len(q.buf) {
			t.Fatalf("step %d: buffer of %d (front %d) for at most %d jobs", step, len(q.buf), q.head, peak)
		}
	}
}

// TestVerifyChecksPhase: a queued job's place in its lane is its phase's.
// Past its grace period, until its grace end is applied, it may still be
// in the fixed order; once it is applied, it must be in rising, and
// Verify reports one put back in the fixed order. A job in the sorted run
// stays there.
func TestVerifyChecksPhase(t *testing.T) {
	const s = int64(1e6)
	e := newTestEngine(t, Config{MaxConcurrency: 1, Aging: Aging{GracePeriod: 10 * s, Interval: s, Step: 1, MaxEffective: 90}})
	var now int64
	enqueue := func(priority int) *Job {
		j := new(Job)
		if r := e.Enqueue(j, &Desc{Type: "t", Priority: priority}, nil, now); r != nil {
			t.Fatalf("refused: %+v", r)
		}
		return j
	}
	enqueue(50) // runs, so that the next ones wait
	inRunJob := enqueue(10)
	j := enqueue(50) // above the run's last: in the fixed heap
	if inRunJob.heap != inRun || j.heap != inFixed {
		t.Fatalf("queued in heaps %d and %d, want the run and the fixed heap", inRunJob.heap, j.heap)
	}
	now = 20 * s
	if err := e.Verify(now); err != nil {
		t.Fatalf("before its grace end is applied: %v", err)
	}
	e.endGrace(now)
	if err := e.Verify(now); err != nil {
		t.Fatalf("after its grace end: %v", err)
	}
	if j.heap != inRising || inRunJob.heap != inRun {
		t.Fatalf("after their grace end the jobs are in heaps %d and %d, not rising and the run", j.heap, inRunJob.heap)
	}
	l := j.lane
	l.remove(j)
	j.heap = inFixed
	l.fixed.Push(iheap.Key{Hi: j.fixedOrder()}, j)
	l.n++
	if err := e.Verify(now); err == nil || !strings.Contains(err.Error(), "filed fixed true") {
		t.Fatalf("an aged job in the fixed order: Verify says %v", err)
	}
}
