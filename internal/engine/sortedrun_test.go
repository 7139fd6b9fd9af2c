package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortedRun applies random pushes (in order, as the lane gives them),
// removals from the front and from the middle, checking the invariants
// after each and the front against a sorted model.
func TestSortedRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var r sortedRun
	var model []*Job // in key order
	key, sub := uint64(0), int64(0)
	for step := 0; step < 50000; step++ {
		switch op := rng.IntN(10); {
		case op < 5 || len(model) == 0:
			key += 1 + uint64(rng.IntN(3))
			sub += int64(rng.IntN(2)) // submitted at the same time, or later
			if len(model) > 0 && r.accepts(key, r.buf[len(r.buf)-1].sub-1) {
				t.Fatalf("step %d: run accepts a job submitted before its last", step)
			}
			if !r.accepts(key, sub) {
				t.Fatalf("step %d: run refused key %d above its last", step, key)
			}
			j := &Job{seq: key, sub: sub}
			r.push(key, j)
			model = append(model, j)
		case op < 7:
			j, _, _ := r.front()
			r.remove(j)
			if j != model[0] {
				t.Fatalf("step %d: front is job %d, want %d", step, j.seq, model[0].seq)
			}
			model = model[1:]
		default:
			i := rng.IntN(len(model))
			r.remove(model[i])
			model = slices.Delete(model, i, i+1)
		}
		if n := len(model); n > 0 && r.accepts(model[n-1].seq, sub) {
			t.Fatalf("step %d: run accepts key %d, not above its last job's", step, model[n-1].seq)
		}
		var got []*Job
		r.each(func(j *Job, key uint64) {
			if key != j.seq || r.buf[j.idx].j != j || r.buf[j.idx].sub != j.sub || j.heap != inRun {
				t.Fatalf("step %d: job %d misfiled", step, j.seq)
			}
			got = append(got, j)
		})
		if !slices.Equal(got, model) || r.len() != len(model) {
			t.Fatalf("step %d: run holds %d jobs (len %d), want %d", step, len(got), r.len(), len(model))
		}
		if f, e, ok := r.front(); ok != (len(model) > 0) || ok && (f != model[0] || e.key != f.seq || e.sub != f.sub) {
			t.Fatalf("step %d: wrong front", step)
		}
		if len(model) == 0 && r.first != (runEntry{}) {
			t.Fatalf("step %d: empty run keeps a front entry", step)
		}
		if len(r.buf) > 2*len(model)+65 {
			t.Fatalf("step %d: buffer of %d for %d jobs", step, len(r.buf), len(model))
		}
	}
}
