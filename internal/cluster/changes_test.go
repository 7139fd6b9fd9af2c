package cluster

import (
	"context"
	"errors"
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

// memLog is a registry that keeps the cluster's log of changes in memory,
// of the configuration of fingerprint "f" only; its first failAppends
// appends fail.
type memLog struct {
	store.Cluster
	mu          sync.Mutex
	recs        []store.ChangeRecord
	failAppends int
}

func (m *memLog) AppendChange(ctx context.Context, fingerprint string, body []byte) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if fingerprint != "f" {
		return 0, errors.New("not the cluster's configuration")
	}
	if m.failAppends > 0 {
		m.failAppends--
		return 0, errors.New("the database is away")
	}
	seq := int64(len(m.recs)+1) * 10 // numbers need not be dense
	m.recs = append(m.recs, store.ChangeRecord{Seq: seq, Body: body})
	return seq, nil
}

func (m *memLog) Changes(_ context.Context, fingerprint string, after int64) ([]store.ChangeRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fingerprint != "f" {
		return nil, nil
	}
	var out []store.ChangeRecord
	for _, r := range m.recs {
		if r.Seq > after {
			out = append(out, r)
		}
	}
	return out, nil
}

func (m *memLog) append(t *testing.T, c decide.Change) {
	b, err := decide.EncodeChange(c)
	require.NoError(t, err)
	_, err = m.AppendChange(context.Background(), "f", b)
	require.NoError(t, err)
}

// lockedHost applies what is delivered under a lock of its own, as the
// run-time layer does under its.
type lockedHost struct{ mu sync.Mutex }

func (h *lockedHost) Deliver(apply func(int64)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	apply(1)
}
func (h *lockedHost) Lose() {}

// changesNode returns a Node on log, leading in term 1, whose appender
// runs until the test ends, and its host.
func changesNode(t *testing.T, log *memLog) (*Node, *lockedHost) {
	h := &lockedHost{}
	r := decide.NewRemote("a", testEngine(), &countGrants{}, &decide.Outbox{}, 1)
	n := &Node{cfg: Config{Name: "a", Capacity: 1, Lease: 100 * time.Millisecond, Grace: 20 * time.Millisecond, Store: log,
		NewTerm: testTerm, Fingerprint: "f"},
		log: slog.New(slog.DiscardHandler), remote: r, host: h,
		stop: make(chan struct{}), appended: make(chan struct{}, 1)}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.lead = newTestLeading(t, n, termOnly{1})
	n.lead.until.Store(int64(time.Hour)) // its lease holds for the test: the log is what is tested
	n.wg.Add(1)
	go n.appendChanges()
	t.Cleanup(func() {
		select {
		case <-n.stop:
		default:
			close(n.stop)
		}
		n.cancel()
		n.wg.Wait()
	})
	return n, h
}

// configure makes change c on n's replica, as its run-time layer does.
func configure(n *Node, h *lockedHost, c decide.Change) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return n.remote.Configure(c, 1)
}

// appended waits for n to append what its replica changed (the bound is
// a deadlock's, not a synchronisation).
func appended(t *testing.T, n *Node) {
	t.Helper()
	select {
	case <-n.appended:
	case <-time.After(time.Minute):
		t.Fatal("the replica's changes were not appended")
	}
}

// A Node applies the log's changes, made elsewhere or by its own
// replica, to its replica's engine and to its leader's, each once, in
// the log's order; its replica's changes reach the log (an append that
// fails is tried again), and reach its own leader's engine through it.
func TestNodeAppliesTheLog(t *testing.T) {
	log := &memLog{}
	n, h := changesNode(t, log)
	own, lead := n.remote, engineOf(n.lead)
	log.append(t, decide.Change{Kind: decide.SetMaxConcurrency, N: 3}) // from another replica
	n.syncChanges()
	assert.Equal(t, 3, lead.MaxConcurrency(), "the leader's engine")
	assert.Equal(t, 3, own.Figures(0, nil).MaxConcurrency, "the replica's engine")

	log.mu.Lock()
	log.failAppends = 1
	log.mu.Unlock()
	require.True(t, configure(n, h, decide.Change{Kind: decide.SetMaxConcurrency, N: 2}))
	assert.Equal(t, 2, own.Figures(0, nil).MaxConcurrency, "the replica's own change, at once")
	assert.Equal(t, 3, lead.MaxConcurrency(), "its leader's engine takes it from the log")
	appended(t, n) // after one failed append, and a retry a period later
	n.syncChanges()
	assert.Equal(t, 2, lead.MaxConcurrency())
	require.Len(t, log.recs, 2)

	// Another replica's change comes after; this one's is not applied
	// again over it.
	log.append(t, decide.Change{Kind: decide.PauseKey, Name: "p"})
	log.append(t, decide.Change{Kind: decide.SetMaxConcurrency, N: 5})
	n.syncChanges()
	n.syncChanges()
	assert.Equal(t, 5, lead.MaxConcurrency())
	assert.Equal(t, 5, own.Figures(0, nil).MaxConcurrency)
	assert.Equal(t, []string{"p"}, lead.PausedKeys())
	assert.Equal(t, int64(40), n.applied)
	assert.Equal(t, int64(40), n.lead.applied)

	// A change this version cannot read is skipped; the rest apply.
	log.mu.Lock()
	log.recs = append(log.recs, store.ChangeRecord{Seq: 41, Body: []byte{99}})
	log.mu.Unlock()
	log.append(t, decide.Change{Kind: decide.SetMaxConcurrency, N: 6})
	n.syncChanges()
	assert.Equal(t, 6, lead.MaxConcurrency())
	assert.Equal(t, 6, own.Figures(0, nil).MaxConcurrency)

	// A new term's engine, made as at New, applies the whole log.
	l := newTestLeading(t, n, termOnly{2}) // not begun: nothing to end
	l.setUntil(time.Now())
	recs, err := log.Changes(context.Background(), "f", 0)
	require.NoError(t, err)
	n.applyChanges(recs, l)
	assert.Equal(t, 6, engineOf(l).MaxConcurrency())
	assert.Equal(t, []string{"p"}, engineOf(l).PausedKeys())
}

// What the replica changed as its Node stops is appended as it stops,
// with a context of its own: the Node's has ended.
func TestNodeAppendsAtStop(t *testing.T) {
	log := &memLog{}
	n, h := changesNode(t, log)
	n.cancel() // as Stop does: every append from now fails, but the last
	require.True(t, configure(n, h, decide.Change{Kind: decide.SetKeyWeight, Name: "k", Weight: 3}))
	close(n.stop)
	n.wg.Wait()
	recs, err := log.Changes(context.Background(), "f", 0)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	c, err := decide.DecodeChange(recs[0].Body)
	require.NoError(t, err)
	assert.Equal(t, decide.Change{Kind: decide.SetKeyWeight, Name: "k", Weight: 3}, c)
}

// Replicas is the registry: none but the Node's own replica.
func (m *memLog) Replicas(context.Context) ([]store.ReplicaRecord, error) { return nil, nil }

// A replica that begins to lead makes its engine as at New and applies
// the whole log to it before its term begins: the first grant of the
// term is decided by every change made before it.
func TestNewTermAppliesTheLog(t *testing.T) {
	log := &memLog{}
	log.append(t, decide.Change{Kind: decide.SetMaxConcurrency, N: 7})
	log.append(t, decide.Change{Kind: decide.PauseKey, Name: "p"})
	h := &lockedHost{}
	r := decide.NewRemote("a", testEngine(), &countGrants{}, &decide.Outbox{}, 1)
	n := &Node{cfg: Config{Name: "a", Capacity: 1, Lease: time.Hour, Grace: time.Minute, Store: log, NewTerm: testTerm,
		Fingerprint: "f"},
		log: slog.New(slog.DiscardHandler), remote: r, host: h, stop: make(chan struct{}), appended: make(chan struct{}, 1)}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	defer n.cancel()
	began := make(chan *engine.Engine, 1)
	n.cfg.OnLead = func(uint64) { began <- engineOf(n.lead) }
	require.NoError(t, n.startLeading(termOnly{1}, time.Now()))
	defer n.stopLeading(false)
	e := <-began
	assert.Equal(t, 7, e.MaxConcurrency(), "as the term began")
	assert.Equal(t, []string{"p"}, e.PausedKeys())
	assert.Equal(t, int64(20), n.lead.applied)
	assert.Equal(t, 7, r.Figures(0, nil).MaxConcurrency, "and the replica's own engine")
}
