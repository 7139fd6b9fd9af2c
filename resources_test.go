package fairsched

import (
	"context"
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
