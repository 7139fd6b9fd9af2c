package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairsched/fairsched/internal/decide"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The link, for maintainers.
//
// A Link carries the messages between a replica's decisions and the
// leader's (decide.Link, decide.Receiver) over LISTEN/NOTIFY. A replica
// has one for its life: it listens on its replica's channel and sends to
// the leader's. The leader has one for its term, besides its replica's:
// it listens on the leader's channel and sends each message to the
// channel of the replica it names, fenced by its term. So a process
// that leads listens on two connections; the leader's channel is
// listened to only while leading (a process that no longer leads must
// not take a replica's Asks), and a leader's Link ends with its term.
//
// Channels. The leader's is "fairsched_lead_" and a replica's is
// "fairsched_repl_", each followed by 32 hex digits of a SHA-256 of the
// store's schema's name (and the replica's): 47 bytes, under
// PostgreSQL's 63, whatever the names, lower case, and apart for two
// schemas on one database.
//
// Sending. Send appends the batch to a queue and returns; one goroutine
// takes what is queued, whole batches up to about maxStatementBytes (one
// batch alone, however large), and sends them in one transaction of one
// round trip: BEGIN ISOLATION LEVEL READ COMMITTED, the statement
// timeout and synchronous_commit off, then one statement that calls
// pg_notify for each payload, unnested from two arrays in order, then
// COMMIT. The server queues a transaction's notifications at its
// commit, one transaction's after another's (commits that notify are
// serialised on a lock), and a listener receives them in that order: a
// batch's payloads reach a listener in order, none of another
// transaction's among them, after those of the transactions committed
// before. A notification is not durable (a server that restarts forgets
// it, and its listeners' connections break: Lost), so the commit need
// not wait for its record's flush: without that wait a message's round
// trip, replica to leader and back, took 0.29-0.32 ms at p50 instead of
// 0.48-0.53 ms (BenchmarkLinkRoundTrip on loopback, the two in turn).
// A leader's statement is fenced as its writes are (the fence CTE,
// lease.go): it calls pg_notify only if the lease is still its own, and
// holds the lease row FOR KEY SHARE until its commit, so a successor takes
// the lease only once every notification its predecessor's fence let
// through is queued, before any of the successor's. A refusal makes
// the Link stop: it calls OnFenced, once, and sends nothing more. A
// send that fails otherwise (a timeout, a dropped connection: the
// notifications may or may not have gone) is dropped, and the Link's
// own Receiver is told Lost: its owner sends, or asks for, the whole
// state again, as the protocol repairs any loss. Told at once, it would
// loop while the database refuses: Lost's answer (a replica's Hello, a
// leader's Resyncs) is a send, which fails at once, and each Lost takes
// the run-time layer's lock to rebuild its whole state. So the sender
// pauses first, 10 ms doubling to MaxBackoff while sends fail, back to
// 10 ms once one succeeds, and sends nothing meanwhile; then it reports
// Lost, once for however many sends failed before. A report pending is
// dropped if the Link tells Lost meanwhile for another reason (the
// listener reconnected): that Lost comes after the failure, and covers
// it. While the database refuses, Lost comes at most once a pause.
//
// Framing. A batch is encoded whole (decide.EncodeMsgs, as one payload),
// and cut into chunks of chunkBytes at most, each sent as one
// notification: base64 of a header (the batch's number, 8 random bytes;
// the chunk's index and the count of chunks, uvarints) and the chunk;
// under the 8000 bytes a payload may take. The receiver joins a batch's
// chunks and decodes them, and hands the batch over only when all have
// come: a batch arrives whole, in one Receive, whatever its size
// (a Hello of thousands of jobs, or a job whose ID alone would not fit
// in a notification). Cutting the encoding rather than packing messages
// into payloads costs the receiver nothing (it joins a batch's parts in
// any case) and has no message too large to send. The index also keeps
// a batch's payloads apart: the server delivers one of a transaction's
// identical notifications on a channel only once. A batch to several
// replicas is one batch per replica's channel.
//
// Receiving. A connection of the Link's own, outside the pool, with the
// pool's settings and the statement timeout, listens on the Link's
// channel; one goroutine waits on it for notifications, joins and
// decodes them, and hands each batch over in order. A chunk out of turn
// (another batch's before one was complete, an index not the next) or
// one that does not decode drops the batch it was part of: that is
// counted (Dropped), and the Receiver is told Lost. Every pingEvery
// without a notification, the goroutine checks the connection with a
// round trip, for a connection cut without a word. A connection that
// fails is closed and made again, with LISTEN, after a pause from 10 ms
// doubling to MaxBackoff, as many times as it takes; once it listens
// again, the Receiver is told Lost (what was sent meanwhile is gone).
// The Receiver's calls, Receive and Lost, are made one at a time.

// LinkConfig configures a Link.
type LinkConfig struct {
	// Pool sends; the listening connection is made with its
	// configuration. Its search_path is the store's schema.
	Pool *pgxpool.Pool
	// Schema is the store's schema's name, Replica this process's
	// replica's: they name the channels.
	Schema, Replica string
	// Lease is nil for a replica's Link. A leader's Link is given its
	// Lease: it listens on the leader's channel, sends each message to
	// the channel of its Replica, fenced by the Lease's term, and
	// OnFenced (if not nil) is called once when a send is refused.
	Lease    *Lease
	OnFenced func()
	// Receiver is handed what arrives (required). Its calls, and
	// OnFenced, are made on the Link's goroutines: they must not wait
	// for the Link's Close.
	Receiver decide.Receiver
	// StatementTimeout bounds every statement (default 5 s).
	StatementTimeout time.Duration
	// MaxBackoff is the longest pause between two attempts to
	// reconnect the listening connection, and between a failed send and
	// the Lost that reports it (default 1 s).
	MaxBackoff time.Duration

	// Tests: how long the listener waits before it checks its
	// connection (default pingEvery), and a call after each check.
	pingEvery time.Duration
	pinged    func()
}

const (
	// chunkBytes is the most bytes of a batch's encoding in one
	// notification: with its header (28 bytes at most) it is 5,997 at
	// most, 7,996 in base64, under the server's 8,000.
	chunkBytes = 5969
	// maxStatementBytes is about the most bytes of encoding one
	// statement sends: batches queued are sent together up to it.
	maxStatementBytes = 256 << 10
	// pingEvery is how long the listener waits without a notification
	// before it checks its connection.
	pingEvery = 10 * time.Second
	// firstPause is the first pause before a reconnection, and before
	// the Lost of a failed send: it doubles to MaxBackoff.
	firstPause = 10 * time.Millisecond
)

// LeaderChannel returns the channel the leader of the store in schema
// listens on.
func LeaderChannel(schema string) string {
	return "fairsched_lead_" + digest(schema)
}

// ReplicaChannel returns the channel replica of the store in schema
// listens on.
func ReplicaChannel(schema, replica string) string {
	return "fairsched_repl_" + digest(schema, replica)
}

// digest returns 32 hex digits of a SHA-256 of the names, each preceded
// by its length.
func digest(names ...string) string {
	h := sha256.New()
	for _, n := range names {
		h.Write(binary.AppendUvarint(nil, uint64(len(n))))
		h.Write([]byte(n))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Link is one process's side of the messages between the replicas'
// decisions and the leader's (see LinkConfig): a decide.Link. Send is
// safe for concurrent use.
type Link struct {
	cfg    LinkConfig
	listen string // the channel listened on

	mu      sync.Mutex
	queue   [][]decide.Msg
	fenced  bool          // a send was refused: the Link sends nothing more
	pending chan struct{} // receives once when the queue becomes non-empty

	recvMu sync.Mutex // held over the Receiver's calls
	// lostDue: a send failed, and no Lost was told since.
	lostDue atomic.Bool
	// dropped counts batches lost: received and not handed over, or
	// not sent.
	dropped atomic.Int64

	// pid is the listening connection's backend (tests end it).
	pid atomic.Uint32

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ decide.Link = (*Link)(nil)

// NewLink makes a Link: it connects and listens before it returns, so
// that what is sent to it from then on arrives, and starts its
// goroutines.
func NewLink(ctx context.Context, cfg LinkConfig) (*Link, error) {
	if cfg.Pool == nil || cfg.Receiver == nil {
		return nil, errors.New("fairschedpg: a link needs a pool and a receiver")
	}
	if cfg.Replica == "" {
		return nil, errors.New("fairschedpg: a link needs its replica's name")
	}
	if cfg.StatementTimeout <= 0 {
		cfg.StatementTimeout = 5 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Second
	}
	if cfg.pingEvery <= 0 {
		cfg.pingEvery = pingEvery
	}
	l := &Link{cfg: cfg, pending: make(chan struct{}, 1)}
	if cfg.Lease != nil {
		l.listen = LeaderChannel(cfg.Schema)
	} else {
		l.listen = ReplicaChannel(cfg.Schema, cfg.Replica)
	}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Add(2)
	go l.receive(conn)
	go l.send()
	return l, nil
}

// Send queues msgs, a batch, to be sent whole, after the batches queued
// before; it never waits for the database. The Link keeps msgs (a copy
// of the slice, not of the messages' Needs). A leader's Link whose send
// was refused drops what it is given.
func (l *Link) Send(msgs []decide.Msg) {
	if len(msgs) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fenced {
		return
	}
	l.queue = append(l.queue, append([]decide.Msg(nil), msgs...))
	if len(l.queue) == 1 {
		select {
		case l.pending <- struct{}{}:
		default:
		}
	}
}

// Dropped returns how many batches were lost: received and not handed
// over (out of turn, or not decodable), or not sent (their statement
// failed).
func (l *Link) Dropped() int64 { return l.dropped.Load() }

// Close stops the Link's goroutines and closes its connection; it
// returns once they stopped. Batches not yet sent are dropped.
func (l *Link) Close() {
	l.cancel()
	l.wg.Wait()
}

// stmtCtx is a context for one round trip: it ends a second after the
// statement timeout, so that a connection that died without a word
// fails the call instead of hanging it.
func (l *Link) stmtCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.cfg.StatementTimeout+time.Second)
}

// lost tells the Receiver that messages may have been lost: this covers
// any failed send not yet reported.
func (l *Link) lost() {
	l.recvMu.Lock()
	defer l.recvMu.Unlock()
	l.lostDue.Store(false)
	l.cfg.Receiver.Lost()
}

// lostIfDue tells the Receiver Lost if a send failed since it was last
// told.
func (l *Link) lostIfDue() {
	l.recvMu.Lock()
	defer l.recvMu.Unlock()
	if l.lostDue.CompareAndSwap(true, false) {
		l.cfg.Receiver.Lost()
	}
}

// send is the sending goroutine.
func (l *Link) send() {
	defer l.wg.Done()
	pause := firstPause
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.pending:
		}
		for {
			batches := l.take()
			if len(batches) == 0 {
				break
			}
			channels, payloads := l.frame(batches)
			if len(payloads) == 0 {
				continue
			}
			err := l.notify(channels, payloads)
			switch {
			case l.ctx.Err() != nil:
				return
			case errors.Is(err, ErrFenced):
				l.mu.Lock()
				l.fenced, l.queue = true, nil
				l.mu.Unlock()
				if l.cfg.OnFenced != nil {
					l.cfg.OnFenced()
				}
				return
			case err != nil:
				l.dropped.Add(int64(len(batches)))
				l.lostDue.Store(true)
				select {
				case <-l.ctx.Done():
					return
				case <-time.After(pause):
				}
				pause = min(2*pause, l.cfg.MaxBackoff)
				l.lostIfDue()
			default:
				pause = firstPause
			}
		}
	}
}

// take takes the batches queued, up to about maxStatementBytes of them
// by a rough estimate (the first whatever its size).
func (l *Link) take() [][]decide.Msg {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, size := 0, 0
	for n < len(l.queue) && (n == 0 || size < maxStatementBytes) {
		for _, m := range l.queue[n] {
			size += 32 + len(m.Replica) + len(m.Desc.Type) + len(m.Desc.ID) + len(m.Desc.Key) + 16*len(m.Needs)
		}
		n++
	}
	out := l.queue[:n:n]
	l.queue = l.queue[n:]
	if len(l.queue) == 0 {
		l.queue = nil
	}
	return out
}

// frame encodes and cuts batches into notifications: their channels
// and their payloads, in order. A replica's batch goes to the leader's
// channel; a leader's is one batch per replica its messages name, in
// the order of their first messages.
func (l *Link) frame(batches [][]decide.Msg) (channels, payloads []string) {
	for _, msgs := range batches {
		if l.cfg.Lease == nil {
			channels, payloads = l.frameOne(channels, payloads, LeaderChannel(l.cfg.Schema), msgs)
			continue
		}
		var order []string
		per := map[string][]decide.Msg{}
		for _, m := range msgs {
			if _, ok := per[m.Replica]; !ok {
				order = append(order, m.Replica)
			}
			per[m.Replica] = append(per[m.Replica], m)
		}
		for _, r := range order {
			channels, payloads = l.frameOne(channels, payloads, ReplicaChannel(l.cfg.Schema, r), per[r])
		}
	}
	return channels, payloads
}

// frameOne appends the notifications of one batch to channel.
func (l *Link) frameOne(channels, payloads []string, channel string, msgs []decide.Msg) ([]string, []string) {
	enc, err := decide.EncodeMsgs(msgs, math.MaxInt)
	if err != nil { // an unknown kind: a bug of the sender's
		l.dropped.Add(1)
		return channels, payloads
	}
	b := enc[0]
	id := rand.Uint64()
	count := (len(b) + chunkBytes - 1) / chunkBytes
	buf := make([]byte, 0, 28+chunkBytes)
	for i := range count {
		buf = binary.LittleEndian.AppendUint64(buf[:0], id)
		buf = binary.AppendUvarint(buf, uint64(i))
		buf = binary.AppendUvarint(buf, uint64(count))
		buf = append(buf, b[i*chunkBytes:min(len(b), (i+1)*chunkBytes)]...)
		channels = append(channels, channel)
		payloads = append(payloads, base64.StdEncoding.EncodeToString(buf))
	}
	return channels, payloads
}

// The statements that send: one pg_notify per payload, in order. A
// leader's is fenced by its term.
const (
	notifySQL = `SELECT count(*) FROM unnest($1::text[], $2::text[]) AS m(c, p), LATERAL pg_notify(m.c, m.p)`

	fencedNotifySQL = fenceCTE + `SELECT 1 FROM unnest($3::text[], $4::text[]) AS m(c, p), LATERAL pg_notify(m.c, m.p)
	WHERE ` + Fenced + `
)
SELECT EXISTS (SELECT FROM fence), (SELECT count(*) FROM w)`
)

// notify sends the notifications in one transaction, in one round trip;
// a leader's fails with ErrFenced if its term is over.
func (l *Link) notify(channels, payloads []string) error {
	ctx, cancel := l.stmtCtx(l.ctx)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(`SELECT set_config('statement_timeout', $1, true), set_config('synchronous_commit', 'off', true)`,
		fmt.Sprint(l.cfg.StatementTimeout.Milliseconds()))
	var sent int64
	ok := true
	var term int64
	if lease := l.cfg.Lease; lease == nil {
		b.Queue(notifySQL, channels, payloads).QueryRow(func(row pgx.Row) error { return row.Scan(&sent) })
	} else {
		var held bool
		if term, held = lease.Term(); !held {
			return fmt.Errorf("%w (%s holds no lease)", ErrFenced, lease.holder)
		}
		b.Queue(fencedNotifySQL, term, lease.holder, channels, payloads).QueryRow(func(row pgx.Row) error {
			return row.Scan(&ok, &sent)
		})
	}
	b.Queue("COMMIT")
	if err := l.cfg.Pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("fairschedpg: sending messages: %w", err)
	}
	if !ok {
		l.cfg.Lease.lost(term)
		return fmt.Errorf("%w (%s's term %d)", ErrFenced, l.cfg.Lease.holder, term)
	}
	if sent != int64(len(payloads)) {
		return fmt.Errorf("fairschedpg: sending messages: %d of %d notifications sent", sent, len(payloads))
	}
	return nil
}

// connect opens the listening connection: a connection of the Link's
// own, with the pool's settings and the statement timeout, that listens
// on the Link's channel.
func (l *Link) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg := l.cfg.Pool.Config().ConnConfig.Copy()
	ms := fmt.Sprint(l.cfg.StatementTimeout.Milliseconds())
	cfg.RuntimeParams["statement_timeout"] = ms
	cfg.RuntimeParams["lock_timeout"] = ms
	cfg.RuntimeParams["default_transaction_isolation"] = "read committed"
	ctx, cancel := l.stmtCtx(ctx)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("fairschedpg: a link's connection: %w", err)
	}
	var pid uint32
	_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.listen}.Sanitize())
	if err == nil {
		err = conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid)
	}
	if err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("fairschedpg: a link's connection: %w", err)
	}
	l.pid.Store(pid)
	return conn, nil
}

// assembly is the batch being joined from its chunks.
type assembly struct {
	id    uint64
	next  uint64 // the index of the chunk expected; 0: none begun
	count uint64
	b     []byte
}

// receive is the listening goroutine; conn listens already.
func (l *Link) receive(conn *pgx.Conn) {
	defer l.wg.Done()
	pause := firstPause
	var a assembly
	for {
		if conn == nil {
			var err error
			conn, err = l.connect(l.ctx)
			if l.ctx.Err() != nil {
				if conn != nil {
					conn.Close(context.Background())
				}
				return
			}
			if err != nil {
				select {
				case <-l.ctx.Done():
					return
				case <-time.After(pause):
				}
				pause = min(2*pause, l.cfg.MaxBackoff)
				continue
			}
			pause = firstPause
			if a.next != 0 {
				l.dropped.Add(1)
			}
			a = assembly{}
			l.lost()
		}
		err := l.wait(conn, &a)
		if l.ctx.Err() != nil {
			conn.Close(context.Background())
			return
		}
		if err != nil {
			conn.Close(context.Background())
			conn = nil
		}
	}
}

// wait waits for a notification on conn, and takes it in; it returns
// an error if the connection failed.
func (l *Link) wait(conn *pgx.Conn, a *assembly) error {
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.pingEvery)
	n, err := conn.WaitForNotification(ctx)
	cancel()
	if err != nil {
		if l.ctx.Err() != nil || conn.IsClosed() || ctx.Err() == nil {
			return err
		}
		// Quiet for pingEvery: is the connection still there? (A
		// notification that comes meanwhile is kept for the next wait.)
		ctx, cancel := l.stmtCtx(l.ctx)
		defer cancel()
		err := conn.Ping(ctx)
		if err == nil && l.cfg.pinged != nil {
			l.cfg.pinged()
		}
		return err
	}
	l.arrived(n.Payload, a)
	return nil
}

// arrived takes in one notification's payload: a chunk of a batch, handed
// over once whole.
func (l *Link) arrived(payload string, a *assembly) {
	p, err := base64.StdEncoding.DecodeString(payload)
	var id, i, count uint64
	if err == nil && len(p) >= 8 {
		id = binary.LittleEndian.Uint64(p)
		p = p[8:]
		var n1, n2 int
		i, n1 = binary.Uvarint(p)
		if n1 > 0 {
			count, n2 = binary.Uvarint(p[n1:])
		}
		if n1 <= 0 || n2 <= 0 || i >= count {
			err = errors.New("a malformed header")
		} else {
			p = p[n1+n2:]
		}
	} else if err == nil {
		err = errors.New("a malformed header")
	}
	switch {
	case err == nil && i == 0:
		if a.next != 0 { // a batch begun and not ended
			l.dropped.Add(1)
			l.lost()
		}
		*a = assembly{id: id, count: count}
	case err != nil || a.next == 0 || id != a.id || i != a.next || count != a.count:
		// Not decodable, or out of turn: the chunk of a batch not
		// begun, or not the next of the one begun.
		l.dropped.Add(1)
		*a = assembly{}
		l.lost()
		return
	}
	a.b = append(a.b, p...)
	a.next = i + 1
	if a.next < a.count {
		return
	}
	b := a.b
	*a = assembly{}
	msgs, err := decide.DecodeMsgs(b)
	if err != nil {
		l.dropped.Add(1)
		l.lost()
		return
	}
	l.recvMu.Lock()
	defer l.recvMu.Unlock()
	l.cfg.Receiver.Receive(msgs)
}
