package fairschedpg

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/store"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clusterSchema returns a new schema, migrated, for replicas' Stores.
func clusterSchema(t *testing.T) string {
	t.Helper()
	pool, name := pgtest.PoolSchema(t)
	require.NoError(t, Migrate(context.Background(), pool))
	return name
}

// replicaStore opens a replica's Store on schema, on a pool of its own:
// a process of its own. It is closed when the test ends.
func replicaStore(t *testing.T, schema string, opts ...Options) *Store {
	t.Helper()
	return replicaStoreOn(t, pgtest.Config(t, schema), opts...)
}

// replicaStoreOn is replicaStore with a pool configured by cfg.
func replicaStoreOn(t *testing.T, cfg *pgxpool.Config, opts ...Options) *Store {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := openPool(context.Background(), pool, options(opts), true)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// recorder is a Receiver that passes on what it is handed, in order: a
// batch, or nil for a call of Lost.
type recorder struct{ events chan []decide.Msg }

func newRecorder() *recorder { return &recorder{events: make(chan []decide.Msg, 100)} }

func (r *recorder) Receive(msgs []decide.Msg) { r.events <- msgs }
func (r *recorder) Lost()                     { r.events <- nil }

// next returns the next batch handed over, failing t if nothing comes in
// a minute (a deadlock's bound, not a synchronisation).
func (r *recorder) next(t *testing.T) []decide.Msg {
	t.Helper()
	select {
	case b := <-r.events:
		require.NotNil(t, b, "Lost, where a batch was expected")
		return b
	case <-time.After(time.Minute):
		t.Fatal("nothing came")
	}
	return nil
}

// closing returns a function that takes a Link made, and closes it when
// the test ends, before the Stores it was made on (cleanups run last
// first): closing(t)(st.ReplicaLink(...)).
func closing(t *testing.T) func(store.ClosingLink, error) store.ClosingLink {
	return func(l store.ClosingLink, err error) store.ClosingLink {
		t.Helper()
		require.NoError(t, err)
		t.Cleanup(l.Close)
		return l
	}
}

// Two replicas, each with its own Store on the schema, register and
// heartbeat; each sees both, in the names' order.
func TestClusterRegistry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := clusterSchema(t)
	a, b := replicaStore(t, schema), replicaStore(t, schema)
	require.NoError(t, b.Register(ctx, "b", 3, "f", time.Minute))
	require.NoError(t, a.Register(ctx, "a", 2, "f", time.Minute))
	require.NoError(t, a.Heartbeat(ctx, "a"))
	require.NoError(t, b.Heartbeat(ctx, "b"))
	both := []store.ReplicaRecord{{Name: "a", Capacity: 2, Live: true}, {Name: "b", Capacity: 3, Live: true}}
	var first []store.ReplicaRecord
	for _, st := range []*Store{a, b} {
		rs, err := st.Replicas(ctx)
		require.NoError(t, err)
		first = rs
		assert.Equal(t, both, withoutIncarnations(rs))
	}
	// Registering again (a restart under its name) is a new incarnation;
	// a heartbeat is not.
	require.NoError(t, a.Register(ctx, "a", 2, "f", time.Minute))
	require.NoError(t, b.Heartbeat(ctx, "b"))
	again, err := a.Replicas(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, first[0].Incarnation, again[0].Incarnation, "a registered again")
	assert.Equal(t, first[1].Incarnation, again[1].Incarnation, "b only heartbeat")

	assert.EqualError(t, a.Register(ctx, "c", 0, "f", time.Minute), `fairschedpg: a replica's capacity must be at least 1: replica "c" has 0`)
	require.ErrorIs(t, a.Heartbeat(ctx, "c"), store.ErrNotRegistered)
	require.NoError(t, b.Deregister(ctx, "b"))
	err = b.Heartbeat(ctx, "b")
	require.ErrorIs(t, err, store.ErrNotRegistered)
	assert.EqualError(t, err, `fairsched: this replica is not registered: "b"`)
	rs, err := a.Replicas(ctx)
	require.NoError(t, err)
	assert.Equal(t, both[:1], withoutIncarnations(rs))
}

// The registry's statements run under the Store's statement timeout, on
// the server: a table locked past it fails them instead of hanging them,
// and the Store goes on once it is free. (The pool has one connection,
// on which each statement ran once before: the first time, pgx prepares
// it outside its transaction, with the client's timeout only.)
func TestClusterStatementTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := clusterSchema(t)
	cfg := pgtest.Config(t, schema)
	cfg.MaxConns = 1
	st := replicaStoreOn(t, cfg, Options{StatementTimeout: 100 * time.Millisecond})
	all := func() []error {
		_, err := st.Replicas(ctx)
		return []error{st.Register(ctx, "a", 1, "f", time.Minute), st.Heartbeat(ctx, "a"), err}
	}
	require.NoError(t, errors.Join(all()...))

	tx, err := replicaStore(t, schema).Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `LOCK TABLE fairsched_replicas`)
	require.NoError(t, err)
	for _, err := range all() {
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		assert.Equal(t, "57014", pgErr.Code, "the server's statement timeout: %v", err)
	}
	require.NoError(t, tx.Rollback(ctx))
	require.NoError(t, errors.Join(all()...))
	rs, err := st.Replicas(ctx)
	require.NoError(t, err)
	assert.Equal(t, []store.ReplicaRecord{{Name: "a", Capacity: 1, Live: true}}, withoutIncarnations(rs))
}

func TestClusterCampaignBadInput(t *testing.T) {
	t.Parallel()
	st := replicaStore(t, clusterSchema(t))
	_, err := st.Campaign(context.Background(), "", time.Second)
	assert.EqualError(t, err, "fairschedpg: a lease needs a holder's name")
	_, err = st.Campaign(context.Background(), "a", time.Microsecond)
	assert.EqualError(t, err, "fairschedpg: a lease's time must be at least 1ms, not 1µs")
}

// Of two replicas campaigning at once, exactly one wins, in the next
// term, and the other gets nil; when the winner steps down, the next
// campaign wins at once. Round after round.
func TestClusterCampaign(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := clusterSchema(t)
	stores := []*Store{replicaStore(t, schema), replicaStore(t, schema)}
	names := []string{"a", "b"}
	wins := map[string]int{}
	for round := uint64(1); round <= 10; round++ {
		var got [2]store.Leadership
		var errs [2]error
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range stores {
			wg.Go(func() {
				<-start
				got[i], errs[i] = stores[i].Campaign(ctx, names[i], time.Minute)
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs[:]...))
		require.True(t, (got[0] == nil) != (got[1] == nil), "round %d: exactly one wins: %v", round, got)
		w := 0
		if got[0] == nil {
			w = 1
		}
		wins[names[w]]++
		assert.Equal(t, round, got[w].Term())
		again, err := stores[1-w].Campaign(ctx, names[1-w], time.Minute)
		require.NoError(t, err)
		assert.Nil(t, again, "the lease is held")
		require.NoError(t, got[w].StepDown(ctx))
		require.ErrorIs(t, got[w].Renew(ctx), store.ErrFenced, "a leadership stepped down is over")
	}
	t.Logf("wins: %v", wins)
}

// A leader whose lease lapsed and was taken by another is fenced: its
// Renew, its Sweep and its Link's sends are refused (ErrFenced), its
// Link says so once (onFenced), and none of its messages arrives. Each
// case has the first word: the database refuses it, and the rest follow.
func TestClusterFenced(t *testing.T) {
	t.Parallel()
	for _, first := range []string{"renew", "sweep", "send"} {
		t.Run(first, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			schema := clusterSchema(t)
			a, b, c := replicaStore(t, schema), replicaStore(t, schema), replicaStore(t, schema)
			toC := newRecorder()
			closing(t)(c.ReplicaLink(ctx, "c", toC))

			const ttl = 500 * time.Millisecond
			old, err := a.Campaign(ctx, "a", ttl)
			require.NoError(t, err)
			require.NotNil(t, old)
			won := time.Now()
			fenced := make(chan struct{}, 10)
			oldLink := closing(t)(old.Link(ctx, newRecorder(), func() { fenced <- struct{}{} }))
			next := takeOver(t, b, "b", ttl, won)
			assert.Equal(t, old.Term()+1, next.Term())
			nextLink := closing(t)(next.Link(ctx, newRecorder(), nil))

			stale := []decide.Msg{{Kind: decide.Grant, Term: old.Term(), Replica: "c", Seq: 1}}
			send := func() {
				oldLink.Send(stale)
				select {
				case <-fenced:
				case <-time.After(time.Minute):
					t.Fatal("the stale leader's Link did not say its send was refused")
				}
			}
			switch first {
			case "renew":
				require.ErrorIs(t, old.Renew(ctx), store.ErrFenced)
			case "sweep":
				_, err := old.Sweep(ctx, time.Hour)
				require.ErrorIs(t, err, store.ErrFenced)
			case "send":
				send()
			}
			err = old.Renew(ctx)
			require.ErrorIs(t, err, store.ErrFenced)
			assert.Contains(t, err.Error(), "fairsched: this replica's term as the leader is over")
			_, err = old.Sweep(ctx, time.Hour)
			require.ErrorIs(t, err, store.ErrFenced)
			if first != "send" {
				send()
			}
			oldLink.Send(stale) // dropped: the Link sends no more, and says so once
			assert.Empty(t, fenced)
			_, err = old.Link(ctx, newRecorder(), nil)
			require.ErrorIs(t, err, store.ErrFenced)
			require.NoError(t, old.StepDown(ctx), "a term over has nothing to give up")
			require.NoError(t, next.Renew(ctx), "nor does it disturb the next")

			// The stale sends ended before this one began: had one
			// notified, its notification would come first.
			fresh := []decide.Msg{{Kind: decide.Resync, Term: next.Term(), Replica: "c"}}
			nextLink.Send(fresh)
			assert.Equal(t, fresh, toC.next(t))
		})
	}
}

// takeOver makes replica name of st the leader once the lease, acquired
// with ttl by a call that returned at won, has lapsed. The database set
// its expiry before won, so it has lapsed by won+ttl (by this process's
// clock: the two clocks' rates agree); the wait is that much time passing,
// not a synchronisation. The campaign is tried again for up to another
// ttl, for a clock slower than the database's.
func takeOver(t *testing.T, st *Store, name string, ttl time.Duration, won time.Time) store.Leadership {
	t.Helper()
	time.Sleep(time.Until(won.Add(ttl)))
	deadline := won.Add(2 * ttl)
	for {
		l, err := st.Campaign(context.Background(), name, time.Minute)
		require.NoError(t, err)
		if l != nil {
			return l
		}
		require.True(t, time.Now().Before(deadline), "the lease has not lapsed %v after it was acquired for %v", time.Since(won), ttl)
	}
}

// The leader's Sweep declares dead a replica whose heartbeat lapsed, not
// one that heartbeat since; the dead one's Heartbeat fails with
// ErrReplicaDead until it registers again.
func TestClusterSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := clusterSchema(t)
	a, b, c := replicaStore(t, schema), replicaStore(t, schema), replicaStore(t, schema)
	leader, err := a.Campaign(ctx, "a", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, leader)

	const lapse = time.Second
	require.NoError(t, b.Register(ctx, "b", 1, "f", time.Minute))
	require.NoError(t, c.Register(ctx, "c", 1, "f", time.Minute))
	registered := time.Now()
	dead, err := leader.Sweep(ctx, lapse)
	require.NoError(t, err)
	assert.Empty(t, dead, "every heartbeat is fresh")

	// b's registration, its last heartbeat, is lapse old once lapse has
	// passed since it returned (the two clocks' rates agree): time
	// passing, not a synchronisation. c heartbeats then, and is fresh
	// while the sweep comes within lapse of it.
	time.Sleep(time.Until(registered.Add(lapse)))
	require.NoError(t, c.Heartbeat(ctx, "c"))
	dead, err = leader.Sweep(ctx, lapse)
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, dead)

	err = b.Heartbeat(ctx, "b")
	require.ErrorIs(t, err, store.ErrReplicaDead)
	assert.EqualError(t, err, `fairsched: this replica is out of the cluster: it must stop its runs and register again: "b" was declared dead`)
	rs, err := b.Replicas(ctx)
	require.NoError(t, err)
	assert.Equal(t, []store.ReplicaRecord{{Name: "b", Capacity: 1, Live: false}, {Name: "c", Capacity: 1, Live: true}}, withoutIncarnations(rs))
	dead, err = leader.Sweep(ctx, lapse)
	require.NoError(t, err)
	assert.Empty(t, dead, "a dead replica is declared so once")

	require.NoError(t, b.Register(ctx, "b", 2, "f", time.Minute))
	require.NoError(t, b.Heartbeat(ctx, "b"), "registered again, live again")
	rs, err = c.Replicas(ctx)
	require.NoError(t, err)
	assert.Equal(t, []store.ReplicaRecord{{Name: "b", Capacity: 2, Live: true}, {Name: "c", Capacity: 1, Live: true}}, withoutIncarnations(rs))
}

// Messages go from replicas' Links to the leader's, and from the leader's
// to each replica its messages name, the leader's own replica among them.
func TestClusterLink(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := clusterSchema(t)
	a, b := replicaStore(t, schema), replicaStore(t, schema)
	leader, err := a.Campaign(ctx, "a", time.Minute)
	require.NoError(t, err)
	require.NotNil(t, leader)
	toLeader, toA, toB := newRecorder(), newRecorder(), newRecorder()
	lead := closing(t)(leader.Link(ctx, toLeader, nil))
	fromA := closing(t)(a.ReplicaLink(ctx, "a", toA))
	fromB := closing(t)(b.ReplicaLink(ctx, "b", toB))

	term := leader.Term()
	ask := func(replica string, seq uint64) decide.Msg {
		return decide.Msg{Kind: decide.Ask, Term: term, Replica: replica, Seq: seq, Desc: engine.Desc{Type: "mail", ID: "m"}, Age: 7}
	}
	grant := func(replica string, seq uint64) decide.Msg {
		return decide.Msg{Kind: decide.Grant, Term: term, Replica: replica, Seq: seq}
	}
	hello := []decide.Msg{{Kind: decide.Hello, Term: term, Replica: "b", N: 1}, ask("b", 1)}
	fromB.Send(hello)
	assert.Equal(t, hello, toLeader.next(t))
	fromA.Send([]decide.Msg{ask("a", 1)})
	assert.Equal(t, []decide.Msg{ask("a", 1)}, toLeader.next(t))

	lead.Send([]decide.Msg{grant("b", 1), grant("a", 1), grant("b", 2)})
	assert.Equal(t, []decide.Msg{grant("b", 1), grant("b", 2)}, toB.next(t))
	assert.Equal(t, []decide.Msg{grant("a", 1)}, toA.next(t))
}

// withoutIncarnations returns rs with their incarnations zeroed, after
// checking each has one.
func withoutIncarnations(rs []store.ReplicaRecord) []store.ReplicaRecord {
	out := slices.Clone(rs)
	for i := range out {
		if out[i].Incarnation == 0 {
			panic("a replica registered has no incarnation")
		}
		out[i].Incarnation = 0
	}
	return out
}
