package fairsched

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Named resources (docs/design.md, Named resources): a resource of 3 units shared by jobs that need 1
// and 2 units is never over-committed, and a 2-unit job is not starved by
// a stream of 1-unit jobs that would take each unit as it frees: first in
// order and short of units, it claims the resource, whose freed units are
// then held for it.
func TestResourceLargeJobNotStarved(t *testing.T) {
	m := newSim(t, Config{
		MaxConcurrency: 10,
		Resources:      map[string]int{"gpu": 3},
		Types: map[string]TypeConfig{
			"small": {Needs: map[string]int{"gpu": 1}},
			"big":   {Needs: map[string]int{"gpu": 2}},
		},
	})
	f := fairFeed(m, func(string, int) (Job, time.Duration) { return Job{Type: "small"}, time.Second })
	for range 6 { // 3 run, 3 wait: each replaced, behind, as it ends
		f.add("k", 0)
	}
	f.fed["k"] = true
	big := m.add("big", 10*time.Second+500*time.Millisecond, Job{Type: "big", Key: "k"}, time.Second)
	m.run(30 * time.Second)

	// The three 1-unit jobs queued before it start at 11 s; then it is first
	// and claims the resource, and starts as those three end.
	require.True(t, big.started())
	assert.Equal(t, 12*time.Second, big.Start, "the 2-unit job's start")
	for _, sj := range m.order {
		units := 0
		for _, o := range m.order {
			if o.Start <= sj.Start && (!o.ended() || o.End > sj.Start) {
				units += map[string]int{"small": 1, "big": 2}[o.Job.Type]
			}
		}
		require.LessOrEqual(t, units, 3, "units in use when %s started at %v", sj.Name, sj.Start)
	}
	st := m.s.Stats()
	require.Len(t, st.Resources, 1)
	assert.Equal(t, ResourceStats{Name: "gpu", Capacity: 3, InUse: 3}, st.Resources[0])
}

// Snapshot names the resource a job waits for; a capacity raised at run
// time lets it start, one lowered holds new starts.
func TestResourceCapacityAtRunTime(t *testing.T) {
	s, _ := newSignalledScheduler(t, Config{
		MaxConcurrency: 4,
		Resources:      map[string]int{"db": 1, "disk": 2},
		Types:          map[string]TypeConfig{"query": {Needs: map[string]int{"db": 1}}},
	})
	g := newGate()
	first, err := s.Submit(context.Background(), Job{Type: "query"}, g.fn)
	require.NoError(t, err)
	<-g.entered
	second, err := s.Submit(context.Background(), Job{Type: "query"}, g.fn)
	require.NoError(t, err)
	own, err := s.Submit(context.Background(), Job{Type: "query", Needs: map[string]int{"disk": 2}}, g.fn)
	require.NoError(t, err)
	<-g.entered // its own needs replace its type's: it runs beside the first
	for _, ji := range s.Snapshot() {
		if ji.Seq == second.Seq() {
			assert.Equal(t, WaitResource, ji.Waiting)
			assert.Equal(t, "db", ji.WaitingFor)
		}
	}
	assert.Equal(t, 1, s.Stats().Waiting[WaitResource])

	require.NoError(t, s.SetResource("db", 2))
	<-g.entered
	assert.Equal(t, 3, s.Stats().Running)
	third, err := s.Submit(context.Background(), Job{Type: "query"}, g.fn)
	require.NoError(t, err)
	require.NoError(t, s.SetResource("db", 0)) // below what runs and what waits
	close(g.open)
	for _, h := range []Handle{first, second, own} {
		require.NoError(t, h.Wait(context.Background()))
	}
	assert.Equal(t, 1, s.Stats().Queued, "the third waits for the capacity to grow")
	require.NoError(t, s.SetResource("db", 1))
	require.NoError(t, third.Wait(context.Background()))
}

// Bad resources and needs are refused with clear errors.
func TestResourceErrors(t *testing.T) {
	_, err := New(Config{Resources: map[string]int{"db": -1}})
	require.ErrorContains(t, err, `Resources["db"] is -1`)
	_, err = New(Config{Types: map[string]TypeConfig{"q": {Needs: map[string]int{"db": 1}}}})
	require.ErrorContains(t, err, `job type "q" needs resource "db", which Config.Resources does not have`)
	_, err = New(Config{Resources: map[string]int{"db": 1}, Types: map[string]TypeConfig{"q": {Needs: map[string]int{"db": 2}}}})
	require.ErrorContains(t, err, `job type "q" needs 2 units of "db", which has 1`)
	_, err = New(Config{Resources: map[string]int{"db": 1}, Types: map[string]TypeConfig{"q": {Needs: map[string]int{"db": 0}}}})
	require.ErrorContains(t, err, `needs 0 units of "db"; a need must be positive`)

	s, _ := newSignalledScheduler(t, Config{Resources: map[string]int{"db": 2}})
	noop := func(context.Context) error { return nil }
	_, err = s.Submit(context.Background(), Job{Needs: map[string]int{"cache": 1}}, noop)
	require.ErrorIs(t, err, ErrUnknownResource)
	require.ErrorContains(t, err, `"cache"`)
	err = s.RunSync(context.Background(), Job{Needs: map[string]int{"db": 3}}, noop)
	require.ErrorIs(t, err, ErrTooMuch)
	require.ErrorContains(t, err, `it needs 3 units of "db", which has 2`)
	require.ErrorContains(t, s.RunSync(context.Background(), Job{Needs: map[string]int{"db": -1}}, noop), "a need must be positive")
	require.ErrorIs(t, s.SetResource("cache", 1), ErrUnknownResource)
	require.ErrorContains(t, s.SetResource("db", -1), "must not be negative")
	assert.Zero(t, s.Stats().Submitted)

	// With no resources at all, a job's own need names an unknown one
	// too; needing none is fine.
	bare, _ := newSignalledScheduler(t, Config{})
	_, err = bare.Submit(context.Background(), Job{Needs: map[string]int{"gpu": 1}}, noop)
	require.ErrorIs(t, err, ErrUnknownResource)
	require.ErrorIs(t, bare.RunSync(context.Background(), Job{Needs: map[string]int{"gpu": 1}}, noop), ErrUnknownResource)
	require.NoError(t, bare.RunSync(context.Background(), Job{Needs: map[string]int{}}, noop))
	assert.Equal(t, uint64(1), bare.Stats().Submitted)
}

// backfillConfig is 3 db units, a job type that needs 2 of them and is
// expected to run 10 s, and one that needs 1 and is expected to run 4 s.
func backfillConfig() Config {
	return Config{
		MaxConcurrency: 10,
		CostAlpha:      1, // an estimate is the last time observed
		Resources:      map[string]int{"db": 3},
		Types: map[string]TypeConfig{
			"big":   {Needs: map[string]int{"db": 2}, DefaultCost: 10 * time.Second},
			"small": {Needs: map[string]int{"db": 1}, DefaultCost: 4 * time.Second},
		},
	}
}

// Backfill: a(2) runs until 10 s, b(2) is first in line and claims the
// units, and c, d and e need 1 unit for 4 s. b could start at 10 s, when
// a is expected to end, so the unit left free goes to c, which ends at 4
// s, then to d, which ends at 8 s; e would end at 12 s, after b's start,
// so it waits for b. Holding every unit for b, c, d and e would start at
// 10, 14 and 18 s, and a unit would sit idle until 10 s.
func TestResourceBackfill(t *testing.T) {
	m := newSim(t, backfillConfig())
	a := m.add("a", 0, Job{Type: "big"}, 10*time.Second)
	b := m.add("b", 0, Job{Type: "big"}, 10*time.Second)
	c := m.add("c", 0, Job{Type: "small"}, 4*time.Second)
	d := m.add("d", 0, Job{Type: "small"}, 4*time.Second)
	e := m.add("e", 0, Job{Type: "small"}, 4*time.Second)
	m.run(time.Minute)

	starts := map[string]time.Duration{}
	for _, j := range []*simJob{a, b, c, d, e} {
		require.True(t, j.started(), j.Name)
		starts[j.Name] = j.Start
	}
	assert.Equal(t, map[string]time.Duration{
		"a": 0, "b": 10 * time.Second, "c": 0, "d": 4 * time.Second, "e": 10 * time.Second,
	}, starts)
}

// The bound holds in what happens, not in what was estimated: a job let
// past the held one that runs longer than its estimate delays it by at
// most the overrun. b needs all 3 units; c, expected to take 4 s, is let
// past it and runs 12 s; b starts when c ends, no later, and d, which
// could have used c's unit had c ended in time, waits behind b.
func TestResourceBackfillOverrun(t *testing.T) {
	cfg := backfillConfig()
	cfg.Types["all"] = TypeConfig{Needs: map[string]int{"db": 3}}
	m := newSim(t, cfg)
	m.add("a", 0, Job{Type: "big"}, 10*time.Second)
	b := m.add("b", 0, Job{Type: "all"}, time.Second)
	c := m.add("c", 0, Job{Type: "small"}, 12*time.Second)
	d := m.add("d", 0, Job{Type: "small"}, 4*time.Second)
	m.run(time.Minute)

	assert.Equal(t, time.Duration(0), c.Start, "c is let past b")
	assert.Equal(t, c.End, b.Start, "b starts as c, 8 s over its estimate, ends")
	assert.Equal(t, 12*time.Second, b.Start)
	assert.Equal(t, b.End, d.Start, "d waits behind b")
}

// The estimate is the one fair share charges: the learned cost of the
// job's (type, ID), its type's default before one is learned. x has been
// seen to take 20 s, so it would not end before b could start, and it is
// not let past; y behind it would, and is: a job that may not use the
// held units does not stop the ones behind it.
func TestResourceBackfillLearnedCost(t *testing.T) {
	m := newSim(t, backfillConfig())
	m.add("x0", 0, Job{Type: "small", ID: "x"}, 20*time.Second) // learns x's cost
	m.add("a", 20*time.Second, Job{Type: "big"}, 10*time.Second)
	b := m.add("b", 20*time.Second, Job{Type: "big"}, 10*time.Second)
	x := m.add("x", 20*time.Second, Job{Type: "small", ID: "x"}, time.Second)
	y := m.add("y", 20*time.Second, Job{Type: "small", ID: "y"}, time.Second)
	m.run(time.Minute)

	assert.Equal(t, 30*time.Second, b.Start)
	assert.Equal(t, 30*time.Second, x.Start, "x starts beside b")
	assert.Equal(t, 20*time.Second, y.Start, "y is let past b, and past x")
}

// Backfill looks past the jobs that may not use the held units: a(2)
// runs until 10 s and b(2) claims the units, and l, expected to run 20 s,
// comes first behind b: it would end after b's start. s, behind it, would
// end at 4 s, and starts at once. l is tried again as s's unit is
// released, still too long, and starts beside b at 10 s.
func TestResourceBackfillLooksPast(t *testing.T) {
	cfg := backfillConfig()
	cfg.Types["long"] = TypeConfig{Needs: map[string]int{"db": 1}, DefaultCost: 20 * time.Second}
	m := newSim(t, cfg)
	m.add("a", 0, Job{Type: "big"}, 10*time.Second)
	b := m.add("b", 0, Job{Type: "big"}, 10*time.Second)
	l := m.add("l", 0, Job{Type: "long"}, 20*time.Second)
	s := m.add("s", 0, Job{Type: "small"}, 4*time.Second)
	m.run(time.Minute)

	assert.Equal(t, time.Duration(0), s.Start, "s is let past b, and past l")
	assert.Equal(t, 10*time.Second, b.Start)
	assert.Equal(t, 10*time.Second, l.Start, "l starts beside b")
}

// The lookahead is bounded: it passes over BackfillLookahead jobs that may
// not use the held units, and the next one stops the others until units
// are released. Behind b, l1 and l2 are too long for the gap before b's
// start and s would fit: with a lookahead of 2 (or the default), s starts
// at once; with 1, l2 stops it, and it starts when b's units are
// released at 20 s; with none (a negative lookahead), l1 does.
func TestResourceBackfillLookaheadBound(t *testing.T) {
	for _, tc := range []struct {
		lookahead int
		sStart    time.Duration
	}{{0, 0}, {2, 0}, {1, 20 * time.Second}, {-1, 20 * time.Second}} {
		t.Run(fmt.Sprint(tc.lookahead), func(t *testing.T) {
			cfg := backfillConfig()
			cfg.BackfillLookahead = tc.lookahead
			cfg.Types["long"] = TypeConfig{Needs: map[string]int{"db": 1}, DefaultCost: 20 * time.Second}
			m := newSim(t, cfg)
			m.add("a", 0, Job{Type: "big"}, 10*time.Second)
			b := m.add("b", 0, Job{Type: "big"}, 10*time.Second)
			m.add("l1", 0, Job{Type: "long"}, 20*time.Second)
			m.add("l2", 0, Job{Type: "long"}, 20*time.Second)
			s := m.add("s", 0, Job{Type: "small"}, 4*time.Second)
			m.run(time.Minute)

			assert.Equal(t, 10*time.Second, b.Start)
			assert.Equal(t, tc.sStart, s.Start)
		})
	}
}
