package engine

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// queueOrderEngine returns an engine with n jobs queued over ten keys and
// two types in two tiers, four of them running, with every kind of unit
// the walk merges: jobs in grace (in sorted runs and fixed heaps), aged
// and urgent jobs, jobs at the ceiling, a key at its cap, a reserving key
// and a conflict lock held with waiters. Jobs arrive one µs apart, the
// first ten thousand of any n alike; the walk is at now.
func queueOrderEngine(t testing.TB, n int) (*Engine, int64) {
	cfg := Config{
		MaxConcurrency: 4, CostAlpha: 0.3, DefaultCost: 1, IdleTTL: 600e6,
		Aging: Aging{GracePeriod: 1e6, Interval: 1e6, Step: 10, MaxEffective: 90, UrgentThreshold: 95},
		Keys:  map[string]Key{"k0": {MaxConcurrency: 1}, "k1": {MinSlots: 2}},
	}
	e := New(cfg, nil)
	for _, ty := range []struct {
		name string
		c    Type
	}{{"t", Type{}}, {"u", Type{Tier: 1, ConflictGroup: "g"}}} {
		if err := e.RegisterType(ty.name, ty.c); err != nil {
			t.Fatal(err)
		}
	}
	// The running jobs: k0 at its cap; a holder of u's conflict "x".
	for _, d := range []Desc{{Type: "t", Key: "k0"}, {Type: "u", Key: "k2", ID: "x"}, {Type: "t", Key: "k3"}, {Type: "t", Key: "k4"}} {
		j := new(Job)
		if r := e.Enqueue(j, &d, nil, 0); r != nil || j.State() != StateRunning {
			t.Fatalf("%+v: refused %v, or %v", d, r, j.State())
		}
	}
	var now int64
	for i := range n {
		now = int64(i)
		d := Desc{Type: "t", Key: fmt.Sprintf("k%d", i%4), Priority: 10 + (i*37)%91}
		if i%3 == 0 {
			d.Type, d.ID = "u", fmt.Sprintf("%d", i%5) // "0".."4"; with the holder's "x", none conflicts
		}
		if i%50 == 7 {
			d.ID = "x"
		}
		if i%11 == 0 {
			d.Priority = 1 + i%7 // mostly in order: sorted runs
		}
		if r := e.Enqueue(new(Job), &d, nil, now); r != nil {
			t.Fatal(r)
		}
	}
	// Past the grace period of the first jobs, which are aged, some to the
	// ceiling and some urgent; the later ones are in theirs.
	return e, 1e6 + 500
}

// TestQueueOrderCostDoesNotGrow: a page of the queue touches as many
// entries of the engine's orders with a thousand jobs queued as with two
// hundred thousand, a small multiple of the jobs it lists or passes over.
// (Exactly as many while the page is small beside the heaps it walks, here
// ten jobs: a page that takes most of a small heap, as twenty take of the
// few urgent jobs in their grace period among a thousand, finds fewer
// children to push.)
func TestQueueOrderCostDoesNotGrow(t *testing.T) {
	sizes := []int{1_000, 10_000, 200_000}
	engines := make([]*Engine, len(sizes))
	var now int64
	for i, n := range sizes {
		engines[i], now = queueOrderEngine(t, n)
	}
	for _, page := range []struct{ offset, limit int }{{0, 10}, {0, 20}, {0, 100}, {100, 100}, {300, 50}} {
		touched := make([]int, len(sizes))
		for i, e := range engines {
			var w orderWalk
			if jobs := w.walk(e, now, page.offset, page.limit); len(jobs) != page.limit {
				t.Fatalf("%d queued, page %+v: %d jobs listed", sizes[i], page, len(jobs))
			}
			touched[i] = w.touched
			if bound := 4*(page.offset+page.limit) + 64; w.touched > bound {
				t.Errorf("%d queued, page %+v: the walk touched %d entries, more than %d", sizes[i], page, w.touched, bound)
			}
		}
		if page.offset == 0 && page.limit <= 10 && (touched[0] != touched[1] || touched[1] != touched[2]) {
			t.Errorf("page %+v: the walk touched %v entries with %v queued, want the same", page, touched, sizes)
		}
	}
}

// TestQueueOrderPages: the walk lists every job waiting in an order once,
// and its pages, walked one at a time, add up to the whole of it; the
// aging moves it makes keep the engine's invariants.
func TestQueueOrderPages(t *testing.T) {
	e, now := queueOrderEngine(t, 1000)
	all := e.QueueOrder(now, 0, math.MaxInt)
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
	if len(all) != e.Pending() {
		t.Fatalf("the walk listed %d jobs, %d are pending", len(all), e.Pending())
	}
	seen := map[*Job]bool{}
	for _, j := range all {
		if seen[j] || !(j.State() == StateQueued || j.State() == StateParked) {
			t.Fatalf("job %d listed twice, or %v", j.Seq(), j.State())
		}
		seen[j] = true
	}
	var paged []*Job
	for off := 0; off < len(all)+37; off += 37 {
		paged = append(paged, e.QueueOrder(now, off, 37)...)
	}
	if !slices.Equal(paged, all) {
		t.Fatal("the pages differ from the whole walk")
	}
	if got := e.QueueOrder(now, -1, 10); got != nil {
		t.Fatalf("a negative offset listed %d jobs", len(got))
	}
	if got := e.QueueOrder(now, 0, 0); got != nil {
		t.Fatalf("a page of 0 listed %d jobs", len(got))
	}
}

// TestPausedJobs: the jobs of paused keys, by key, then of paused types,
// by type, a page at a time, every one once.
func TestPausedJobs(t *testing.T) {
	e, now := queueOrderEngine(t, 1000)
	e.PauseKey("k2", now)
	e.PauseType("u", now)
	e.PauseKey("k1", now)
	if err := e.Verify(now); err != nil {
		t.Fatal(err)
	}
	n := e.Summary().Paused
	all := e.PausedJobs(0, math.MaxInt)
	if len(all) != n || n == 0 {
		t.Fatalf("%d paused jobs listed, %d paused", len(all), n)
	}
	seen := map[*Job]bool{}
	group := func(j *Job) string { // the list the job is in: of the pause that set it aside
		if j.held == pausedByKey {
			return "key " + j.Key()
		}
		return "type " + j.Type()
	}
	var groups []string
	for _, j := range all {
		if seen[j] || j.State() != StatePaused {
			t.Fatalf("job %d listed twice, or %v", j.Seq(), j.State())
		}
		seen[j] = true
		if g := group(j); len(groups) == 0 || groups[len(groups)-1] != g {
			groups = append(groups, g)
		}
	}
	if want := []string{"key k1", "key k2", "type u"}; !slices.Equal(groups, want) {
		t.Fatalf("listed %v, want %v", groups, want)
	}
	var paged []*Job
	for off := 0; off < n+13; off += 13 {
		paged = append(paged, e.PausedJobs(off, 13)...)
	}
	if !slices.Equal(paged, all) {
		t.Fatal("the pages differ from the whole list")
	}
	if got := e.PausedJobs(1, math.MaxInt); !slices.Equal(got, all[1:]) {
		t.Fatal("a page of every job but the first differs")
	}
	if e.PausedJobs(n, 5) != nil || e.PausedJobs(-1, 5) != nil || e.PausedJobs(0, 0) != nil {
		t.Fatal("a page past the end, before the start or of no job lists jobs")
	}
}
