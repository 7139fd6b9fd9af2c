package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/fairsched/fairsched/internal/store"
)

// A leadership that changes nothing in a database: the term is all it has.
type termOnly struct{ term uint64 }

func (s termOnly) Term() uint64                                         { return s.term }
func (termOnly) Renew(context.Context) error                            { return nil }
func (termOnly) Sweep(context.Context, time.Duration) ([]string, error) { return nil, nil }
func (termOnly) StepDown(context.Context) error                         { return nil }
func (termOnly) Link(context.Context, decide.Receiver, func()) (store.ClosingLink, error) {
	return nil, nil
}
func (termOnly) Jobs() store.Store { return nil }

// sentLink keeps what is sent on it.
type sentLink struct{ sent [][]decide.Msg }

func (c *sentLink) Send(m []decide.Msg) { c.sent = append(c.sent, m) }
func (c *sentLink) Close()              {}

func testEngine() *engine.Engine {
	return engine.New(engine.Config{MaxConcurrency: 1, CostAlpha: 0.3, DefaultCost: 1}, nil)
}

// engineTerm is a term's decisions for the tests (Config.NewTerm): the
// Leader of replica "a", of capacity 1, over an engine of testEngine's,
// keeping no durable job, under a lock of its own; its times are µs
// since it was made.
type engineTerm struct {
	mu    sync.Mutex
	e     *engine.Engine
	l     *decide.Leader
	epoch time.Time
}

func testTerm(_ store.Store, out *decide.Outbox, valid func() bool) (Term, error) {
	t := &engineTerm{e: testEngine(), epoch: time.Now()}
	t.l = decide.NewLeader("a", 1, t.e, noGrants{}, out)
	t.l.SetGuard(valid)
	return t, nil
}

func (t *engineTerm) Leader() *decide.Leader { return t.l }
func (t *engineTerm) Abandon()               {}
func (t *engineTerm) Deliver(apply func(now int64)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	apply(1<<50 + time.Since(t.epoch).Microseconds())
}

// engineOf returns the engine of term l's decisions.
func engineOf(l *leading) *engine.Engine { return l.term.(*engineTerm).e }

// newTestLeading is newLeading, which testTerm never fails.
func newTestLeading(t *testing.T, n *Node, ship store.Leadership) *leading {
	l, err := newLeading(n, ship)
	require.NoError(t, err)
	return l
}

// noGrants is the Grantee of a Leader with no job of its process's own.
type noGrants struct{}

func (noGrants) Granted(j *engine.Job) { panic("a job of the leader's own process was granted") }
func (noGrants) Ended(*engine.Job, engine.Outcome, *engine.Refusal, int64) {
	panic("a job of the leader's own process ended")
}

// What this replica sends in a term that is not its own leading's (a
// stale term of its own still running here, a new one begun elsewhere)
// goes over the database, to the leader of that term; what it sends in
// its own term stays in the process.
func TestUpLinkRoutesByTerm(t *testing.T) {
	db := &sentLink{}
	n := &Node{cfg: Config{Name: "a", Capacity: 1, NewTerm: testTerm}, link: db}
	l := newTestLeading(t, n, termOnly{2})
	l.link = &sentLink{}
	n.lead = l
	upLink{n}.Send([]decide.Msg{
		{Kind: decide.End, Term: 2, Replica: "a", Seq: 1},
		{Kind: decide.Hello, Term: 3, Replica: "a"},
	})
	require.Len(t, db.sent, 1, "term 3's Hello went to term 3's leader")
	assert.Equal(t, uint64(3), db.sent[0][0].Term)
	l.lapse()
	upLink{n}.Send([]decide.Msg{{Kind: decide.End, Term: 2, Replica: "a", Seq: 2}})
	assert.Len(t, db.sent, 2, "a term whose lease could lapse decides nothing more here")
}

// heartbeats is a registry whose heartbeats succeed.
type heartbeats struct{ store.Cluster }

func (heartbeats) Heartbeat(context.Context, string) error { return nil }

// gatedHost holds the first Deliver until released.
type gatedHost struct {
	calls            int
	entered, release chan struct{}
}

func (h *gatedHost) Deliver(apply func(int64)) {
	h.calls++
	if h.calls == 1 {
		close(h.entered)
		<-h.release
	}
	apply(1)
}
func (h *gatedHost) Lose() {}

type countGrants struct{ n int }

func (g *countGrants) Granted(*engine.Job)                                       { g.n++ }
func (g *countGrants) Ended(*engine.Job, engine.Outcome, *engine.Refusal, int64) {}

// A fence and a heartbeat that cross leave the Node and its Remote
// agreeing, and the next heartbeat lifts the fence: grants are taken
// again.
func TestFenceAndHeartbeatCross(t *testing.T) {
	g := &countGrants{}
	r := decide.NewRemote("a", testEngine(), g, &decide.Outbox{}, 1)
	var j engine.Job
	_, ref := r.Enqueue(&j, engine.Desc{Key: "k"}, nil, 1)
	require.Nil(t, ref)
	r.Receive([]decide.Msg{{Kind: decide.Resync, Term: 1, Replica: "a"}}, 1)
	h := &gatedHost{entered: make(chan struct{}), release: make(chan struct{})}
	n := &Node{cfg: Config{Name: "a", Capacity: 1, Lease: time.Hour, Grace: time.Minute, Store: heartbeats{}},
		log: slog.New(slog.DiscardHandler), remote: r, host: h, resign: make(chan struct{}, 1), ctx: context.Background()}
	n.fenceAt = time.AfterFunc(time.Hour, func() {})
	defer n.fenceAt.Stop()
	done := make(chan struct{})
	go func() { defer close(done); n.fence() }()
	<-h.entered
	n.heartbeat() // renewed while the fence is on its way
	close(h.release)
	<-done
	assert.True(t, n.fenced.Load(), "fenced after all: the fence came last")
	r.Receive([]decide.Msg{{Kind: decide.Grant, Term: 1, Replica: "a", Seq: j.Seq(), Sync: 1}}, 2)
	assert.Zero(t, g.n, "fenced: the grant is dropped")
	n.heartbeat()
	assert.False(t, n.fenced.Load())
	r.Receive([]decide.Msg{{Kind: decide.Grant, Term: 1, Replica: "a", Seq: j.Seq(), Sync: 2}}, 3)
	assert.Equal(t, 1, g.n, "unfenced: its Hello said again what waits, and the grant is taken")
}

// lapsing is a registry where the replica's registration lapsed: its
// heartbeats fail, and Register answers with err, recording its lease.
type lapsing struct {
	store.Cluster
	err    error
	leases []time.Duration
}

func (*lapsing) Heartbeat(_ context.Context, name string) error {
	return fmt.Errorf("%w: %q: its registration lapsed", store.ErrReplicaDead, name)
}
func (s *lapsing) Register(_ context.Context, _ string, _ int, _ string, lease time.Duration) error {
	s.leases = append(s.leases, lease)
	return s.err
}

// plainHost applies at once, and counts calls of Lose.
type plainHost struct{ lost int }

func (h *plainHost) Deliver(apply func(int64)) { apply(1) }
func (h *plainHost) Lose()                     { h.lost++ }

// A replica whose registration lapsed is told so by its heartbeat: it
// stops its runs and registers again, with its lease; refused, it stays
// fenced, and is let back in once its registration is accepted.
func TestHeartbeatLapsedRegistersAgain(t *testing.T) {
	g := &countGrants{}
	r := decide.NewRemote("a", testEngine(), g, &decide.Outbox{}, 1)
	reg := &lapsing{err: fmt.Errorf("%w: another", store.ErrConfigMismatch)}
	h := &plainHost{}
	n := &Node{cfg: Config{Name: "a", Capacity: 1, Lease: time.Hour, Grace: time.Minute, Store: reg},
		log: slog.New(slog.DiscardHandler), remote: r, host: h, resign: make(chan struct{}, 1), ctx: context.Background()}
	n.fenceAt = time.AfterFunc(time.Hour, func() {})
	defer n.fenceAt.Stop()
	n.heartbeat()
	assert.True(t, n.fenced.Load(), "refused: fenced")
	assert.Equal(t, 1, h.lost, "its runs stopped")
	assert.Equal(t, []time.Duration{time.Hour}, reg.leases, "registered again, with its lease")
	reg.err = nil
	n.heartbeat()
	assert.False(t, n.fenced.Load(), "registered again: unfenced")
	assert.Equal(t, 1, h.lost, "stopped once")
	assert.Equal(t, []time.Duration{time.Hour, time.Hour}, reg.leases)
}

// A term past the time its lease could lapse decides nothing, even
// before its timer (stopAt) fires: a process woken from a SIGSTOP past
// that time runs its goroutines in any order, the timer's maybe last,
// and an end reported first would otherwise be granted on in a term
// another replica may hold already.
func TestLeadingPastUntilDecidesNothing(t *testing.T) {
	n := &Node{cfg: Config{Name: "a", Capacity: 1, NewTerm: testTerm, Lease: time.Second, Grace: 200 * time.Millisecond},
		link: &sentLink{}}
	l := newTestLeading(t, n, termOnly{2})
	l.link = &sentLink{}
	n.lead = l
	l.setUntil(time.Now().Add(-time.Second)) // renewed 2 s ago, and the timer has not run
	applied := false
	l.do(func(int64) { applied = true })
	assert.False(t, applied, "nothing is applied past until")
	assert.False(t, l.current(2), "the term lapsed")
	l.setUntil(time.Now())
	l.do(func(int64) { applied = true })
	assert.False(t, applied, "nor after, once lapsed")
}

// Lapsed, asked as a granted job is about to begin, is the fence's timer
// read at that instant: past the time the registration could lapse it
// fences the replica (once: its runs stop) and reports true, even before
// the timer fires; renewed, it reports false.
func TestLapsedFencesBeforeTheTimer(t *testing.T) {
	r := decide.NewRemote("a", testEngine(), &countGrants{}, &decide.Outbox{}, 1)
	h := &plainHost{}
	n := &Node{cfg: Config{Name: "a", Capacity: 1, Lease: time.Second, Grace: 200 * time.Millisecond, Store: heartbeats{}},
		log: slog.New(slog.DiscardHandler), remote: r, host: h, resign: make(chan struct{}, 1), ctx: context.Background(),
		epoch: time.Now()}
	n.fenceAt = time.AfterFunc(time.Hour, func() {}) // the timer has not run
	defer n.fenceAt.Stop()
	n.renewed(time.Now())
	assert.False(t, n.Lapsed(), "just renewed")
	assert.Zero(t, h.lost)
	n.renewed(time.Now().Add(-time.Second)) // renewed a lease ago: paused since
	assert.True(t, n.Lapsed())
	assert.True(t, n.fenced.Load(), "fenced")
	assert.Equal(t, 1, h.lost, "its runs stopped")
	assert.True(t, n.Lapsed(), "still lapsed")
	assert.Equal(t, 1, h.lost, "stopped once")
	n.heartbeat()
	assert.False(t, n.Lapsed(), "renewed")
	assert.False(t, n.fenced.Load(), "unfenced")
}
