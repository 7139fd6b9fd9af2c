package rt

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/fairschedsqlite"
	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/store"
)

// A keeper's term, driven by hand: the replica "c" is messages the test
// writes, and the store a file of its own.
func newTestKeeper(t *testing.T, jobs ...*store.Job) (keeperTerm, *decide.Outbox, store.Store) {
	t.Helper()
	st, err := fairschedsqlite.Open(filepath.Join(t.TempDir(), "jobs.db"))
	require.NoError(t, err)
	require.NoError(t, st.Insert(context.Background(), nil, jobs...))
	out := new(decide.Outbox)
	k, err := New(Config{
		Engine: engine.Config{MaxConcurrency: 4, CostAlpha: 0.3, DefaultCost: 1, IdleTTL: int64(10 * time.Minute / time.Microsecond)},
		Errors: testErrors,
		Types:  map[string]TypeConfig{"mail": {}},
		Store:  &termStore{Store: st},
		keeper: &keeperConfig{name: "l", out: out, valid: func() bool { return true }},
	})
	require.NoError(t, err)
	term := keeperTerm{k}
	t.Cleanup(term.Abandon) // closes the store too
	return term, out, st
}

// nextRun returns the next Run out holds, dropping what comes before it.
func nextRun(t *testing.T, out *decide.Outbox) decide.Msg {
	t.Helper()
	for {
		for _, m := range out.Take() {
			if m.Kind == decide.Run {
				return m
			}
		}
		select {
		case <-out.Pending():
		case <-time.After(time.Minute):
			t.Fatal("no Run sent in a minute")
		}
	}
}

// A Resync sent twice crosses an attempt's Run: the replica's second
// Hello does not list the attempt, as the replica drops a Run stamped
// with an older Hello's Sync. The keeper sends the same attempt again,
// stamped with the new Sync: a Resync costs no attempt. The attempts of a
// replica declared dead are lost.
func TestKeeperRunCrossedByHello(t *testing.T) {
	ctx := context.Background()
	crossed := &store.Job{Type: "mail", State: store.Queued, Args: []byte(`"a"`)}
	lost := &store.Job{Type: "mail", State: store.Queued, Args: []byte(`"b"`)}
	term, out, st := newTestKeeper(t, crossed, lost) // c has one slot: one at a time
	leader := term.Leader()
	receive := func(msgs ...decide.Msg) {
		term.Deliver(func(now int64) { leader.Receive(msgs, now) })
	}
	hello := func(sync uint64) {
		receive(decide.Msg{Kind: decide.Hello, Term: 1, Replica: "c", Sync: sync, Types: []string{"mail"}})
	}
	term.Deliver(func(now int64) { leader.Begin(1, map[string]int{"c": 1}, now) })
	hello(1)
	run := nextRun(t, out)
	assert.Equal(t, decide.Msg{Kind: decide.Run, Term: 1, Replica: "c", Sync: 1, Seq: uint64(crossed.ID), Attempt: 1,
		Desc: engine.Desc{Type: "mail"}, Args: []byte(`"a"`)}, run)

	hello(2) // the answer to a second Resync, sent before c had the Run: c drops it
	again := nextRun(t, out)
	run.Sync = 2
	assert.Equal(t, run, again, "the same attempt, stamped with the new Hello's Sync")
	receive(decide.Msg{Kind: decide.Done, Term: 1, Replica: "c", Seq: again.Seq, Attempt: 1, Outcome: engine.Completed})

	run = nextRun(t, out) // c's slot is free: the first job's end is recorded
	assert.Equal(t, decide.Msg{Kind: decide.Run, Term: 1, Replica: "c", Sync: 2, Seq: uint64(lost.ID), Attempt: 1,
		Desc: engine.Desc{Type: "mail"}, Args: []byte(`"b"`)}, run)
	require.NoError(t, st.Flush(ctx))
	state, why, found, err := st.Ended(ctx, crossed.ID)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, store.Completed, state, why)
	term.Deliver(func(now int64) { leader.RemoveReplica("c", now) }) // declared dead: what it ran is lost
	require.NoError(t, term.s.WaitIdle(ctx))
	require.NoError(t, st.Flush(ctx))
	state, why, found, err = st.Ended(ctx, lost.ID)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, store.Dead, state, "lost, and its type allows one attempt")
	assert.Contains(t, why, "replica c no longer runs it")
	assert.Empty(t, out.Take(), "nothing sent again")
}
