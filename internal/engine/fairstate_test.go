package engine

import (
	"fmt"
	"testing"
)

// An engine restored from another's fair state, given that engine's
// waiting jobs with their submission times, starts them in the order the
// other would have: the keys' virtual times, the tier's floor, the stamps
// and the learned costs all carry over. Without them the two part at
// once (TestRestoreFairMatters).
func TestRestoreFairContinuesTheOrder(t *testing.T) {
	a, b := fairPair(t, true)
	if a != b {
		t.Fatalf("restored engine started\n%s\nthe original\n%s", b, a)
	}
}

// TestRestoreFairMatters checks that the test above can fail: without the
// fair state, the restored engine starts the jobs in another order.
func TestRestoreFairMatters(t *testing.T) {
	a, b := fairPair(t, false)
	if a == b {
		t.Fatalf("both engines started %s: the workload does not depend on the fair state", a)
	}
}

// fairPair runs a workload on one engine to its end, and on another that
// takes over half-way (with the fair state if restore), and returns the
// order each started the second half in.
func fairPair(t *testing.T, restore bool) (original, restored string) {
	cfg := Config{MaxConcurrency: 1, Keys: map[string]Key{"a": {Weight: 1}, "b": {Weight: 3}, "c": {Weight: 2}},
		Aging: Aging{GracePeriod: 5e6, Interval: 1e6, Step: 5}}
	const n, half = 60, 25
	cost := func(i int) int64 { return int64(1+i%4) * 1e6 } // what job i runs for
	e := newTestEngine(t, cfg)
	jobs := make([]*Job, n)
	label := make(map[*Job]int)
	var now int64
	for i := range jobs {
		jobs[i] = new(Job)
		label[jobs[i]] = i
		now += 100e3
		e.Enqueue(jobs[i], &Desc{Type: "t", Key: string(rune('a' + i%3)), ID: fmt.Sprint("r", i%5), Priority: 10 + i%7*10}, nil, now)
	}
	// run starts k jobs, one at a time, each when the one before ends:
	// the engine stops between two jobs, as after a Shutdown.
	run := func(e *Engine, label map[*Job]int, k int) string {
		order := ""
		for range k {
			j := e.Next(now)
			if j == nil {
				break
			}
			order += fmt.Sprint(label[j], " ")
			now += cost(label[j])
			e.Finish(j, Completed, now)
			if err := e.Verify(now); err != nil {
				t.Fatal(err)
			}
		}
		return order
	}
	e.Finish(jobs[0], Completed, now) // the first started at once
	run(e, label, half)
	start := now
	saved := e.SaveFair()
	waiting := e.PendingJobs()

	// The restored engine takes over with the same clock reading.
	r := newTestEngine(t, cfg)
	if restore {
		r.RestoreFair(saved, now)
	}
	rlabel := make(map[*Job]int)
	for _, j := range sortBySeq(waiting) {
		c := new(Job)
		rlabel[c] = label[j]
		r.Enqueue(c, &Desc{Type: "t", Key: j.Key(), ID: j.ID(), Priority: j.Base()}, &Times{Submitted: j.Submitted()}, now)
		if c.Running() {
			t.Fatalf("restored job %d started at once, before the order chose", label[j])
		}
	}
	original = run(e, label, n)
	now = start
	restored = run(r, rlabel, n)
	return original, restored
}

func sortBySeq(js []*Job) []*Job {
	out := append([]*Job(nil), js...)
	for i := range out {
		for k := i + 1; k < len(out); k++ {
			if out[k].Seq() < out[i].Seq() {
				out[i], out[k] = out[k], out[i]
			}
		}
	}
	return out
}
