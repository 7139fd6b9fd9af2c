package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fairsched/fairsched/internal/iheap"
)

// newTestEngine returns an engine for cfg with the defaults fairsched
// would resolve, and a type "t" in tier 0.
func newTestEngine(t *testing.T, cfg Config) *Engine {
	t.Helper()
	if cfg.CostAlpha == 0 {
		cfg.CostAlpha = 0.3
	}
	if cfg.DefaultCost == 0 {
		cfg.DefaultCost = 1
	}
	if cfg.IdleTTL == 0 {
		cfg.IdleTTL = (10 * time.Minute).Microseconds()
	}
	e := New(cfg, nil)
	if err := e.RegisterType("t", Type{}); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestGraceQueueForgetsEndedJobs: jobs that end within their grace period
// while an older one still waits leave no entry behind. Without that, the
// grace queue would grow with throughput × GracePeriod rather than with
// the queue, and keep every ended record alive.
func TestGraceQueueForgetsEndedJobs(t *testing.T) {
	e := newTestEngine(t, Config{MaxConcurrency: 1, Aging: Aging{GracePeriod: 3600e6, Interval: 1e6, Step: 1}})
	var now int64
	holder := new(Job)
	e.Enqueue(holder, &Desc{Type: "t"}, nil, now)
	if holder.State() != StateRunning {
		t.Fatalf("the first job is %v, want running", holder.State())
	}
	waiter := new(Job) // waits, in its grace period, for the whole test
	e.Enqueue(waiter, &Desc{Type: "t"}, nil, now)
	for i := 0; i < 1000; i++ {
		now++
		j := new(Job)
		e.Enqueue(j, &Desc{Type: "t"}, nil, now)
		e.Cancel(j, now)
		if err := e.Verify(now); err != nil {
			t.Fatalf("after %d jobs: %v", i+1, err)
		}
	}
	if live := e.grace.len(); live != 1 {
		t.Fatalf("the grace queue holds %d jobs, want only the one still waiting", live)
	}
	if n := len(e.grace.buf); n > 200 {
		t.Fatalf("the grace queue's buffer has %d entries for 1 job", n)
	}
}

// TestErrorf checks Verify's formatter on every kind of value it is given.
func TestErrorf(t *testing.T) {
	got := errorf("%q %d %d %d %d %d %v %v %v %v", "k", 1, int32(-2), int64(3), uint64(4), StateDone, true, 0.5,
		iheap.Key{Hi: 5, Lo: 6}, conflictKey{"g", "id"}).Error()
	want := `"k" 1 -2 3 4 4 true 0.5 {5 6} {"g" "id"}`
	if got != want {
		t.Fatalf("errorf gives %s, want %s", got, want)
	}
}

// TestAllocationsGroupTheOtherKeys checks the allocations the engine
// computes, with the unconfigured keys entering the water-filling as one,
// against Allocate over every busy key one by one.
func TestAllocationsGroupTheOtherKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for round := 0; round < 200; round++ {
		slots := rng.IntN(40)
		cfg := Config{
			MaxConcurrency: slots,
			DefaultKey:     Key{Weight: float64(1 + rng.IntN(3)), MaxConcurrency: rng.IntN(4)},
			Keys:           map[string]Key{},
		}
		reserved := 0
		for i := 0; i < rng.IntN(5); i++ {
			k := Key{Weight: 0.5 + 4*rng.Float64(), MaxConcurrency: rng.IntN(6)}
			if min := rng.IntN(3); reserved+min <= slots && (k.MaxConcurrency == 0 || min <= k.MaxConcurrency) {
				k.MinSlots, reserved = min, reserved+min
			}
			cfg.Keys["c"+strconv.Itoa(i)] = k
		}
		e := newTestEngine(t, cfg)
		var now int64
		for i := 0; i < rng.IntN(60); i++ {
			name := "o" + strconv.Itoa(rng.IntN(20))
			if rng.IntN(3) == 0 {
				name = "c" + strconv.Itoa(rng.IntN(5))
			}
			now++
			e.Enqueue(new(Job), &Desc{Type: "t", Key: name}, nil, now)
			for e.Next(now) != nil {
			}
		}
		if err := e.Verify(now); err != nil {
			t.Fatal(err)
		}
		var keys []*keyState
		var demands []Demand
		for _, k := range e.keys {
			if k.busy() {
				keys = append(keys, k)
				demands = append(demands, e.demandOf(k))
			}
		}
		want := Allocate(slots, demands)
		a := e.allocations()
		for i, k := range keys {
			if got := e.allocationOf(k, a); math.Abs(got-want[i]) > 1e-9 {
				t.Fatalf("round %d: key %q (configured %v) has allocation %v, want %v", round, k.name, k.configured, got, want[i])
			}
		}
	}
}

// Find stops at the job it finds: the walk of the pending jobs ends at
// the first for which its function says stop, wherever the job is held.
func TestFindStopsAtTheJob(t *testing.T) {
	e := newTestEngine(t, Config{MaxConcurrency: 1})
	var now int64
	running := new(Job)
	e.Enqueue(running, &Desc{Type: "t", Key: "a"}, nil, now)
	for i := range 30 {
		e.Enqueue(new(Job), &Desc{Type: "t", Key: strconv.Itoa(i % 4)}, nil, now)
	}
	var all []*Job
	e.eachPending(func(j *Job) bool { all = append(all, j); return true })
	if len(all) != 30 {
		t.Fatalf("the walk gives %d pending jobs, want 30", len(all))
	}
	for _, want := range all {
		after := 0 // jobs visited after the walk was told to stop
		stopped := false
		e.eachPending(func(j *Job) bool {
			if stopped {
				after++
			}
			stopped = stopped || j == want
			return !stopped
		})
		if after > 0 {
			t.Errorf("a walk told to stop at job %d visits %d jobs more", want.Seq(), after)
		}
		if e.Find(want.Seq()) != want {
			t.Errorf("Find(%d) does not find it", want.Seq())
		}
	}
	if e.Find(running.Seq()) != running || e.Find(1<<40) != nil {
		t.Error("Find of the running job, or of a number never given")
	}
}

// Keys lists the configured and paused keys and the max busiest others
// (most work, then by name), selected without sorting them all, and sums
// up the rest: the same as sorting every key with work.
func TestKeysListsTheBusiest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 50 {
		e := newTestEngine(t, Config{MaxConcurrency: 1 + rng.IntN(5)})
		var now int64
		for range rng.IntN(400) {
			e.Enqueue(new(Job), &Desc{Type: "t", Key: "k" + strconv.Itoa(rng.IntN(60))}, nil, now)
		}
		for range rng.IntN(3) {
			e.SetKey("k"+strconv.Itoa(rng.IntN(80)), Key{Weight: 2}, now)
			e.PauseKey("k"+strconv.Itoa(rng.IntN(80)), now)
		}
		var want []string
		var others []*keyState
		for _, k := range e.keys {
			if k.configured || k.paused {
				want = append(want, k.name)
			} else if k.work() > 0 {
				others = append(others, k)
			}
		}
		slices.SortFunc(others, func(a, b *keyState) int {
			if busier(a, b) {
				return -1
			}
			return 1
		})
		for _, max := range []int{0, 1, 5, 32, 100} {
			names := slices.Clone(want)
			var rest KeySummary
			for i, k := range others {
				if i < max {
					names = append(names, k.name)
					continue
				}
				rest.Keys++
				rest.Running += k.running
				rest.Queued += k.pending + k.aside
			}
			slices.Sort(names)
			listed, gotRest := e.Keys(max)
			var got []string
			for _, k := range listed {
				got = append(got, k.Key)
			}
			if !slices.Equal(got, names) || gotRest != rest {
				t.Fatalf("round %d, max %d: Keys lists %v and sums %+v, want %v and %+v", round, max, got, gotRest, names, rest)
			}
		}
	}
}
