package fairsched

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/fairsched/fairsched/internal/iheap"
	"github.com/fairsched/fairsched/internal/rt"
)

// BenchmarkFloor measures, on the machine at hand, the unavoidable parts of
// the speed targets (docs/performance.md).
//
// What any RunSync that meets docs/design.md (Fair share and cost, Calling it) pays before scheduling
// anything: two clock reads (a job's cost is its observed wall time), one
// context of its own for fn (fn may keep it after returning), and the lock
// taken twice.
//
// What any Submit with a million jobs queued pays: the record its Handle
// refers to, allocated while a million such records are live (so the
// collector's share is included), and a read of the record of a job queued
// long ago, the one it dispatches, which is not in any cache.
//
// What any scheduler that orders jobs as docs/design.md (The order) does pays per
// job, at 1,000 and 1,000,000 jobs queued over 10,000 keys: fair-queue is
// the least such a scheduler does (floorQueue), built from the same heaps.
func BenchmarkFloor(b *testing.B) {
	b.Run("clock-read", func(b *testing.B) {
		epoch := time.Now()
		var sum time.Duration
		for i := 0; i < b.N; i++ {
			sum += time.Since(epoch)
		}
		runtime.KeepAlive(sum)
	})
	b.Run("context-alloc", func(b *testing.B) {
		b.ReportAllocs()
		var c *rt.JobContext
		for i := 0; i < b.N; i++ {
			c = rt.NewJobContext(context.Background())
		}
		runtime.KeepAlive(c)
	})
	b.Run("lock-unlock", func(b *testing.B) {
		var s struct { // the lock and a word it guards, as the scheduler's
			mu     sync.Mutex
			closed bool
		}
		for i := 0; i < b.N; i++ {
			s.mu.Lock()
			s.closed = !s.closed
			s.mu.Unlock()
		}
	})
	const live = 1000000
	b.Run("record-alloc-1M-live", func(b *testing.B) {
		ring := make([]*rt.Task, live)
		for i := range ring {
			ring[i] = rt.NewSubmitTask(context.Background(), noop)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			ring[i%live] = rt.NewSubmitTask(context.Background(), noop)
		}
	})
	b.Run("cold-read-1M", func(b *testing.B) {
		// A cycle through a million records the size of a Submit's, in
		// random order: each step's address depends on the last read.
		type record struct {
			next *record
			_    [unsafe.Sizeof(rt.Task{}) - 8]byte
		}
		recs := make([]*record, live)
		for i := range recs {
			recs[i] = new(record)
		}
		order := rand.New(rand.NewPCG(3, 4)).Perm(live)
		for i, k := range order {
			recs[k].next = recs[order[(i+1)%live]]
		}
		r := recs[0]
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			r = r.next
		}
		runtime.KeepAlive(r)
	})
	for _, n := range []int{1000, live} {
		b.Run("fair-queue-"+count(n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			names := make([]string, 10000)
			for i := range names {
				names[i] = fmt.Sprintf("key-%d", i)
			}
			q := newFloorQueue()
			submit := func() { q.submit(names[rng.IntN(len(names))], 1+rng.IntN(100), 0.5+rng.Float64()) }
			for i := 0; i < n; i++ {
				submit()
			}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				submit()
				q.dispatch()
			}
		})
	}
}

// floorQueue is the least a scheduler that orders jobs as docs/design.md
// (The order) does can do per job: find the job's key by name and queue the job
// there by priority; then take the key with the least virtual time, take
// its first job and charge the key for it. It has no types, tiers, caps,
// conflicts, aging, learnt costs, slots, statistics or lock, each of which
// a conforming scheduler adds to it, and its heaps have no handles: it
// never takes a job or a key from the middle of one. Keys of equal virtual
// time are taken in no particular order, which costs nothing.
type floorQueue struct {
	byName map[string]*floorKey
	ready  plainHeap[*floorKey] // keys with queued jobs, by virtual time
	seq    uint64
}

// floorJob is a queued job: the scheduler's own record of a Submit job,
// and the cost the floor charges, read from it as the scheduler reads its
// estimate.
type floorJob struct {
	rt.Task
	cost float64
}

type floorKey struct {
	v     float64
	jobs  plainHeap[*floorJob] // highest priority, then oldest
	ready bool                 // in floorQueue.ready
}

func newFloorQueue() *floorQueue { return &floorQueue{byName: make(map[string]*floorKey)} }

func (q *floorQueue) submit(name string, priority int, cost float64) {
	k := q.byName[name]
	if k == nil {
		k = new(floorKey)
		q.byName[name] = k
	}
	q.seq++
	j := &floorJob{cost: cost}
	k.jobs.push(iheap.Key{Hi: uint64(100-priority)<<56 | q.seq}, j)
	if !k.ready {
		k.ready = true
		q.ready.push(iheap.Key{Hi: iheap.Float(k.v)}, k)
	}
}

func (q *floorQueue) dispatch() *floorJob {
	k := q.ready[0].x
	j := k.jobs.pop()
	k.v += j.cost
	if len(k.jobs) == 0 {
		k.ready = false
		q.ready.pop()
	} else {
		q.ready[0].key = iheap.Key{Hi: iheap.Float(k.v)}
		q.ready.down(0)
	}
	return j
}

// plainHeap is a binary min-heap without handles.
type plainHeap[T any] []plainEntry[T]

type plainEntry[T any] struct {
	key iheap.Key
	x   T
}

func (h *plainHeap[T]) push(k iheap.Key, x T) {
	*h = append(*h, plainEntry[T]{k, x})
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if !a[i].key.Less(a[p].key) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *plainHeap[T]) pop() T {
	a := *h
	x, n := a[0].x, len(a)-1
	a[0], a[n] = a[n], plainEntry[T]{}
	*h = a[:n]
	h.down(0)
	return x
}

// down restores the order below i after i's key grew.
func (h plainHeap[T]) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1].key.Less(h[c].key) {
			c++
		}
		if !h[c].key.Less(h[i].key) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
