package cluster

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairsched/fairsched/fairschedpg/internal/pgtest"
	"github.com/fairsched/fairsched/fairschedpg/internal/schema"
	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// recorder is a Receiver that passes on what it is handed, in order:
// a batch, or nil for a call of Lost.
type recorder struct{ events chan []decide.Msg }

func newRecorder() *recorder { return &recorder{events: make(chan []decide.Msg, 1000)} }

func (r *recorder) Receive(msgs []decide.Msg) {
	if msgs == nil {
		panic("a nil batch")
	}
	r.events <- msgs
}
func (r *recorder) Lost() { r.events <- nil }

// event returns what comes next, failing t if nothing comes in a minute
// (a deadlock's bound, not a synchronisation).
func (r *recorder) event(t testing.TB) []decide.Msg {
	t.Helper()
	select {
	case e := <-r.events:
		return e
	case <-time.After(time.Minute):
		t.Fatal("nothing came")
	}
	return nil
}

// next returns the next batch handed over.
func (r *recorder) next(t testing.TB) []decide.Msg {
	t.Helper()
	b := r.event(t)
	if b == nil {
		t.Fatal("Lost, where a batch was expected")
	}
	return b
}

// waitLost waits for a call of Lost.
func (r *recorder) waitLost(t testing.TB) {
	t.Helper()
	if b := r.event(t); b != nil {
		t.Fatalf("a batch (%+v), where Lost was expected", b)
	}
}

// quiet checks that nothing was handed over.
func (r *recorder) quiet(t testing.TB) {
	t.Helper()
	select {
	case b := <-r.events:
		t.Fatalf("unexpected: %+v (nil: Lost)", b)
	default:
	}
}

// process is what the tests give each simulated process: a pool of its
// own on the schema.
func process(t testing.TB, schema string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), pgtest.Config(t, schema))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// migratedSchema returns the name of a new schema, migrated.
func migratedSchema(t testing.TB) string {
	t.Helper()
	pool, name := pgtest.PoolSchema(t)
	_, err := schema.Migrate(context.Background(), pool)
	require.NoError(t, err)
	return name
}

func newLink(t testing.TB, cfg LinkConfig) *Link {
	t.Helper()
	l, err := NewLink(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(l.Close)
	return l
}

// leaderLink acquires the lease for holder, on its own pool, and makes
// its Link; fenced receives when a send is refused.
func leaderLink(t testing.TB, schema, holder string, recv decide.Receiver) (*Link, *Lease, chan struct{}) {
	t.Helper()
	pool := process(t, schema)
	lease, err := NewLease(pool, holder, time.Minute)
	require.NoError(t, err)
	ok, err := lease.Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, ok, "%s acquires the lease", holder)
	fenced := make(chan struct{}, 10)
	l := newLink(t, LinkConfig{Pool: pool, Schema: schema, Replica: holder, Lease: lease, Receiver: recv,
		OnFenced: func() { fenced <- struct{}{} }})
	return l, lease, fenced
}

func replicaLink(t testing.TB, schema, name string, recv decide.Receiver) *Link {
	t.Helper()
	return newLink(t, LinkConfig{Pool: process(t, schema), Schema: schema, Replica: name, Receiver: recv})
}

func ask(replica string, term, seq uint64) decide.Msg {
	return decide.Msg{Kind: decide.Ask, Term: term, Replica: replica, Seq: seq,
		Desc: engine.Desc{Type: "mail", ID: fmt.Sprint("job-", seq)}, Age: 12}
}

func TestChannelNames(t *testing.T) {
	long := strings.Repeat("ß", 100)
	names := map[string]bool{}
	for _, c := range []string{
		LeaderChannel("s"), LeaderChannel(long), ReplicaChannel("s", "r"), ReplicaChannel("s", long),
		ReplicaChannel("s", "r1"), ReplicaChannel("sr", "1"), ReplicaChannel("s", ""), LeaderChannel(""),
	} {
		assert.LessOrEqual(t, len(c), 63, c)
		assert.Regexp(t, `^fairsched_(lead|repl)_[0-9a-f]{32}$`, c)
		assert.False(t, names[c], "%s twice", c)
		names[c] = true
	}
}

// TestLinkRoundTrip: a replica's batches reach the leader whole and in
// order, and the leader's reach each replica they name, that replica's
// messages only, in order.
func TestLinkRoundTrip(t *testing.T) {
	schema := migratedSchema(t)
	toLeader, toR1, toR2 := newRecorder(), newRecorder(), newRecorder()
	leader, lease, fenced := leaderLink(t, schema, "leader", toLeader)
	r1 := replicaLink(t, schema, "r1", toR1)
	r2 := replicaLink(t, schema, "r2", toR2)
	term, _ := lease.Term()

	var sent [][]decide.Msg
	for i := range 20 {
		b := []decide.Msg{ask("r1", uint64(term), uint64(2*i+1)), ask("r1", uint64(term), uint64(2*i+2))}
		if i == 0 {
			b = append([]decide.Msg{{Kind: decide.Hello, Term: uint64(term), Replica: "r1", N: 2}}, b...)
		}
		r1.Send(b)
		sent = append(sent, b)
	}
	for _, want := range sent {
		assert.Equal(t, want, toLeader.next(t))
	}

	grant := func(r string, seq uint64) decide.Msg {
		return decide.Msg{Kind: decide.Grant, Term: uint64(term), Replica: r, Seq: seq}
	}
	leader.Send([]decide.Msg{grant("r1", 1), grant("r2", 7), grant("r1", 2), grant("r2", 8)})
	leader.Send([]decide.Msg{grant("r2", 9)})
	assert.Equal(t, []decide.Msg{grant("r1", 1), grant("r1", 2)}, toR1.next(t))
	assert.Equal(t, []decide.Msg{grant("r2", 7), grant("r2", 8)}, toR2.next(t))
	assert.Equal(t, []decide.Msg{grant("r2", 9)}, toR2.next(t))
	toR1.quiet(t)
	toLeader.quiet(t)
	assert.Empty(t, fenced)
	for _, l := range []*Link{leader, r1, r2} {
		assert.Zero(t, l.Dropped())
	}
}

// TestLinkLargeBatch: a batch of many notifications, and one whose one
// message is larger than a notification, each arrive whole, in one
// Receive, in the order sent among small ones.
func TestLinkLargeBatch(t *testing.T) {
	schema := migratedSchema(t)
	toLeader := newRecorder()
	leaderLink(t, schema, "leader", toLeader)
	r1 := replicaLink(t, schema, "r1", newRecorder())

	hello := []decide.Msg{{Kind: decide.Hello, Term: 1, Replica: "r1", N: 20_000}}
	for i := range 20_000 {
		hello = append(hello, ask("r1", 1, uint64(i+1)))
	}
	enc, err := decide.EncodeMsgs(hello, 1<<30)
	require.NoError(t, err)
	require.Greater(t, len(enc[0]), 50*chunkBytes, "the batch takes many notifications")
	huge := ask("r1", 1, 20_001)
	huge.Desc.ID = strings.Repeat("x", 3*chunkBytes)
	small := []decide.Msg{ask("r1", 1, 20_002)}

	r1.Send(small)
	r1.Send(hello)
	r1.Send(small)
	r1.Send([]decide.Msg{huge})
	r1.Send(small)
	for _, want := range [][]decide.Msg{small, hello, small, {huge}, small} {
		got := toLeader.next(t)
		require.Equal(t, len(want), len(got))
		assert.Equal(t, want, got)
	}
	toLeader.quiet(t)
}

// TestLinkStaleLeader: a leader whose term is over has its sends
// refused, is told, and sends nothing after; none of its messages
// arrives.
func TestLinkStaleLeader(t *testing.T) {
	schema := migratedSchema(t)
	toR1 := newRecorder()
	old, oldLease, fenced := leaderLink(t, schema, "old", newRecorder())
	replicaLink(t, schema, "r1", toR1)

	admin := process(t, schema)
	lapse(t, admin)
	_, lease, newFenced := leaderLink(t, schema, "new", newRecorder())
	next := newLink(t, LinkConfig{Pool: process(t, schema), Schema: schema, Replica: "new", Lease: lease, Receiver: newRecorder()})
	term, _ := lease.Term()
	oldTerm := term - 1

	stale := decide.Msg{Kind: decide.Grant, Term: uint64(oldTerm), Replica: "r1", Seq: 1}
	old.Send([]decide.Msg{stale})
	select {
	case <-fenced:
	case <-time.After(time.Minute):
		t.Fatal("the stale leader was not told its send was refused")
	}
	_, held := oldLease.Term()
	assert.False(t, held, "the stale leader's lease holds nothing")
	old.Send([]decide.Msg{stale}) // dropped

	// The stale send's statement ended before this one began: had it
	// notified, its notification would come first.
	fresh := decide.Msg{Kind: decide.Resync, Term: uint64(term), Replica: "r1"}
	next.Send([]decide.Msg{fresh})
	assert.Equal(t, []decide.Msg{fresh}, toR1.next(t))
	toR1.quiet(t)
	assert.Len(t, fenced, 0, "told once")
	assert.Len(t, newFenced, 0)
}

// TestLinkReconnects: a listener whose backend the server ends
// reconnects, listens again, and says that messages may be lost.
func TestLinkReconnects(t *testing.T) {
	schema := migratedSchema(t)
	toR1 := newRecorder()
	leader, lease, _ := leaderLink(t, schema, "leader", newRecorder())
	r1 := replicaLink(t, schema, "r1", toR1)
	term, _ := lease.Term()

	admin := process(t, schema)
	for round := range 3 {
		pid := r1.pid.Load()
		var ended bool
		require.NoError(t, admin.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&ended))
		require.True(t, ended)
		toR1.waitLost(t)
		assert.NotEqual(t, pid, r1.pid.Load(), "round %d: a new backend", round)
		m := decide.Msg{Kind: decide.Resync, Term: uint64(term), Replica: "r1", Seq: uint64(round)}
		leader.Send([]decide.Msg{m})
		assert.Equal(t, []decide.Msg{m}, toR1.next(t))
	}
}

// TestLinkSendFails: a send whose statement fails is dropped, counted,
// and the sender's own Receiver is told Lost (its owner sends the whole
// state again).
func TestLinkSendFails(t *testing.T) {
	schema := migratedSchema(t)
	pool := process(t, schema)
	toR1 := newRecorder()
	r1 := newLink(t, LinkConfig{Pool: pool, Schema: schema, Replica: "r1", Receiver: toR1})
	pool.Close()
	r1.Send([]decide.Msg{ask("r1", 1, 1)})
	toR1.waitLost(t)
	assert.Equal(t, int64(1), r1.Dropped())
}

// answerer is a replica's Receiver whose Lost answers with a send, as a
// replica's Hello does; it counts the calls of Lost, and tells lost of
// each if there is room.
type answerer struct {
	link   *Link
	answer []decide.Msg
	losts  atomic.Int64
	lost   chan struct{}
}

func (a *answerer) Receive([]decide.Msg) {}
func (a *answerer) Lost() {
	a.losts.Add(1)
	select {
	case a.lost <- struct{}{}:
	default:
	}
	a.link.Send(a.answer)
}

// TestLinkSendFailsBacksOff: while the server cannot be reached, a
// failed send's Lost, whose answer is another send, which fails, comes
// after a pause that doubles to MaxBackoff: a bounded number of times
// over a period, not in a loop. Once the server can be reached, what is
// sent arrives.
func TestLinkSendFailsBacksOff(t *testing.T) {
	schema := migratedSchema(t)
	toLeader := newRecorder()
	leaderLink(t, schema, "leader", toLeader)

	// r1's pool dials the server only while refuse is false: it is set
	// once the Link listens (on a connection of its own, made with the
	// pool's settings), before the pool has made any.
	var refuse atomic.Bool
	cfg := pgtest.Config(t, schema)
	var d net.Dialer
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if refuse.Load() {
			return nil, errors.New("refused by the test")
		}
		return d.DialContext(ctx, network, addr)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	const maxBackoff = 40 * time.Millisecond
	hello := []decide.Msg{{Kind: decide.Hello, Term: 1, Replica: "r1"}}
	r1recv := &answerer{answer: hello, lost: make(chan struct{}, 1)}
	r1 := newLink(t, LinkConfig{Pool: pool, Schema: schema, Replica: "r1", Receiver: r1recv, MaxBackoff: maxBackoff})
	r1recv.link = r1
	refuse.Store(true)
	require.Zero(t, pool.Stat().TotalConns())

	r1.Send(hello)
	select {
	case <-r1recv.lost:
	case <-time.After(time.Minute):
		t.Fatal("a failed send was not reported Lost")
	}
	// The count over a period is what is checked: the sleep is that
	// period, not a synchronisation. Each Lost follows a pause of its
	// own; after the first (10 ms), at most two are shorter than
	// maxBackoff (20 and 40 ms, then 40 ms each), and one may be under
	// way as the period begins.
	// The bound is of the period measured (a sleep may last longer).
	start, before := time.Now(), r1recv.losts.Load()
	time.Sleep(time.Second)
	during, period := r1recv.losts.Load()-before, time.Since(start)
	bound := int64(period/maxBackoff) + 3
	t.Logf("Lost %d times in %v (bound %d), %d batches dropped", during, period.Round(time.Millisecond), bound, r1.Dropped())
	assert.LessOrEqual(t, during, bound)
	assert.Positive(t, during, "sends are still tried")

	refuse.Store(false)
	marker := []decide.Msg{ask("r1", 1, 7)}
	r1.Send(marker)
	for {
		got := toLeader.next(t)
		if got[0].Kind == decide.Hello {
			continue // an answer to a Lost
		}
		assert.Equal(t, marker, got)
		break
	}
}

// TestLinkPingsWhenQuiet: a listener quiet for a while checks its
// connection, which stays, and goes on listening.
func TestLinkPingsWhenQuiet(t *testing.T) {
	schema := migratedSchema(t)
	toR1 := newRecorder()
	pinged := make(chan struct{}, 100)
	r1 := newLink(t, LinkConfig{Pool: process(t, schema), Schema: schema, Replica: "r1", Receiver: toR1,
		pingEvery: time.Millisecond, pinged: func() {
			select {
			case pinged <- struct{}{}:
			default:
			}
		}})
	pid := r1.pid.Load()
	for range 5 {
		<-pinged
	}
	leader, _, _ := leaderLink(t, schema, "leader", newRecorder())
	m := decide.Msg{Kind: decide.Resync, Term: 1, Replica: "r1"}
	for range 20 {
		leader.Send([]decide.Msg{m})
		assert.Equal(t, []decide.Msg{m}, toR1.next(t))
	}
	assert.Equal(t, pid, r1.pid.Load(), "the same connection")
	assert.Zero(t, r1.Dropped())
}

// TestLinkDropsWhatItCannotRead: a payload that does not decode, and a
// batch cut short, are dropped and counted, with Lost; what follows
// arrives.
func TestLinkDropsWhatItCannotRead(t *testing.T) {
	schema := migratedSchema(t)
	toR1 := newRecorder()
	r1 := replicaLink(t, schema, "r1", toR1)
	admin := process(t, schema)
	channel := ReplicaChannel(schema, "r1")
	good := decide.Msg{Kind: decide.Grant, Term: 3, Replica: "r1", Seq: 5}
	enc, err := decide.EncodeMsgs([]decide.Msg{good}, 100)
	require.NoError(t, err)
	chunk := func(id, i, count uint64, b []byte) string {
		h := binary.LittleEndian.AppendUint64(nil, id)
		h = binary.AppendUvarint(h, i)
		h = binary.AppendUvarint(h, count)
		return base64.StdEncoding.EncodeToString(append(h, b...))
	}
	notify := func(payloads ...string) {
		t.Helper()
		_, err := admin.Exec(context.Background(), `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, channel, payloads)
		require.NoError(t, err)
	}
	for name, payloads := range map[string][]string{
		"not base64":      {"!!!"},
		"no header":       {base64.StdEncoding.EncodeToString([]byte{1, 2})},
		"index past end":  {chunk(1, 1, 1, enc[0])},
		"not a message":   {chunk(1, 0, 1, []byte{9, 9, 9})},
		"chunk not begun": {chunk(1, 1, 2, enc[0])},
		"another batch":   {chunk(1, 0, 2, enc[0][:2]), chunk(2, 1, 2, enc[0][2:])},
	} {
		before := r1.Dropped()
		notify(payloads...)
		toR1.waitLost(t)
		notify(chunk(7, 0, 1, enc[0]))
		assert.Equal(t, []decide.Msg{good}, toR1.next(t), name)
		assert.Equal(t, before+1, r1.Dropped(), name)
	}
	// A batch begun and not ended, then another: the first is dropped,
	// the second arrives.
	notify(chunk(1, 0, 2, enc[0][:2]), chunk(2, 0, 2, enc[0][:3]), chunk(2, 1, 2, enc[0][3:]))
	toR1.waitLost(t)
	assert.Equal(t, []decide.Msg{good}, toR1.next(t))
	toR1.quiet(t)
}

// TestLinkCloseStopsItsGoroutines: Close returns once the Link's
// goroutines stopped, with sends queued and a connection reconnecting.
func TestLinkCloseStopsItsGoroutines(t *testing.T) {
	schema := migratedSchema(t)
	pool := process(t, schema)
	admin := process(t, schema)
	ignore := goleak.IgnoreCurrent()
	toR1 := newRecorder()
	l, err := NewLink(context.Background(), LinkConfig{Pool: pool, Schema: schema, Replica: "r1", Receiver: toR1})
	require.NoError(t, err)
	for i := range 100 {
		l.Send([]decide.Msg{ask("r1", 1, uint64(i+1))})
	}
	_, err = admin.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, int32(l.pid.Load()))
	require.NoError(t, err)
	l.Close()
	goleak.VerifyNone(t, ignore)
}

// BenchmarkLinkRoundTrip: a message from a replica to the leader and an
// answer back, one at a time, on two processes' Links; p50 and p99 of
// the round trip, in µs.
func BenchmarkLinkRoundTrip(b *testing.B) {
	schema := migratedSchema(b)
	toR1 := newRecorder()
	echo := &echoer{}
	leader, lease, _ := leaderLink(b, schema, "leader", echo)
	echo.link = leader
	term, _ := lease.Term()
	r1 := replicaLink(b, schema, "r1", toR1)
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		r1.Send([]decide.Msg{ask("r1", uint64(term), uint64(i+1))})
		got := toR1.next(b)
		lat = append(lat, time.Since(start))
		if got[0].Seq != uint64(i+1) {
			b.Fatalf("grant of %d, want %d", got[0].Seq, i+1)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// echoer is a leader's Receiver that grants each Ask at once.
type echoer struct{ link *Link }

func (e *echoer) Receive(msgs []decide.Msg) {
	out := make([]decide.Msg, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, decide.Msg{Kind: decide.Grant, Term: m.Term, Replica: m.Replica, Seq: m.Seq})
	}
	e.link.Send(out)
}
func (e *echoer) Lost() {}
