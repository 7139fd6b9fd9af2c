package fairsched

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Supersede (docs/design.md, Duplicates): a newer submission of a type and ID replaces the
// one waiting, which ends with ErrSuperseded, and takes a fresh aging
// clock; one that has started is not replaced.
func TestSupersede(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 1, Aging: AgingConfig{Interval: time.Second, Step: 10},
		Types: map[string]TypeConfig{"sync": {Duplicates: Supersede}}})
	g := newGate()
	running, err := tt.s.Submit(context.Background(), Job{Type: "sync", ID: "repo"}, g.fn)
	require.NoError(t, err)
	<-g.entered
	first, err := tt.s.Submit(context.Background(), Job{Type: "sync", ID: "repo"}, g.fn)
	require.NoError(t, err)
	other, err := tt.s.Submit(context.Background(), Job{Type: "sync", ID: "other"}, g.fn)
	require.NoError(t, err)
	tt.set(3 * time.Second)
	second, err := tt.s.Submit(context.Background(), Job{Type: "sync", ID: "repo"}, g.fn)
	require.NoError(t, err)

	require.True(t, ended(first))
	require.ErrorIs(t, first.Err(), ErrSuperseded)
	assert.Contains(t, first.Err().Error(), "job 2 replaced by job 4")
	assert.False(t, ended(running), "a running job is not replaced")
	assert.False(t, ended(other), "nor one of another ID")
	for _, ji := range tt.s.Snapshot() {
		if ji.Seq == second.Seq() {
			assert.Equal(t, 50, ji.EffectivePriority, "a fresh aging clock")
		}
	}
	st := tt.s.Stats()
	assert.EqualValues(t, 1, st.Superseded)
	assert.EqualValues(t, 1, st.Cancelled)
	assert.Equal(t, 2, st.Queued)
	close(g.open)
	for _, h := range []Handle{running, other, second} {
		require.NoError(t, h.Wait(context.Background()))
	}
	_, err = New(Config{Types: map[string]TypeConfig{"x": {Duplicates: 7}}})
	require.ErrorContains(t, err, "Duplicates is 7, not a DuplicatePolicy")
}

// Child jobs (docs/design.md, Child jobs): a job submitted with a context that descends
// from a running job's starts at the parent's effective priority when
// that is higher, so it does not fall behind the parent's peers.
func TestChildInheritsPriority(t *testing.T) {
	s, _ := newSignalledScheduler(t, Config{MaxConcurrency: 1})
	g := newGate()
	children := make(chan Handle, 1)
	parent, err := s.Submit(context.Background(), Job{Priority: 90}, func(ctx context.Context) error {
		h, err := s.Submit(context.WithValue(ctx, struct{}{}, "derived"), Job{Priority: 10}, g.fn)
		children <- h
		return err
	})
	require.NoError(t, err)
	child := <-children
	require.NoError(t, parent.Wait(context.Background()))
	for _, ji := range s.Snapshot() {
		if ji.Seq == child.Seq() {
			assert.Equal(t, 90, ji.BasePriority, "raised to its parent's")
		}
	}
	// A context of a job that has ended raises nothing, nor does a lower
	// parent priority lower a child's.
	var late context.Context
	done, err := s.Submit(context.Background(), Job{Priority: 95}, func(ctx context.Context) error { late = ctx; return nil })
	require.NoError(t, err)
	<-g.entered // the child runs, then the parent that keeps its context
	close(g.open)
	require.NoError(t, child.Wait(context.Background()))
	require.NoError(t, done.Wait(context.Background()))
	g2 := newGate()
	hold, err := s.Submit(context.Background(), Job{}, g2.fn)
	require.NoError(t, err)
	<-g2.entered
	orphan, err := s.Submit(late, Job{Priority: 20}, g2.fn)
	require.NoError(t, err)
	for _, ji := range s.Snapshot() {
		if ji.Seq == orphan.Seq() {
			assert.Equal(t, 20, ji.BasePriority)
		}
	}
	close(g2.open)
	require.NoError(t, hold.Wait(context.Background()))
	require.NoError(t, orphan.Wait(context.Background()))
}
