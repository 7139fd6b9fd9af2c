package decide

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/engine"
)

// A cluster's decisions in one test, without goroutines: a Leader and
// Remotes whose messages the test carries (flush), on one clock of its
// own. The engines' limits are the same everywhere, as the configuration
// is; only the leader's decide.

// party records what one process's run-time layer is handed.
type party struct {
	granted []*engine.Job
	ended   []ended
}

type ended struct {
	j *engine.Job
	o engine.Outcome
	r *engine.Refusal
}

func (p *party) Granted(j *engine.Job) { p.granted = append(p.granted, j) }
func (p *party) Ended(j *engine.Job, o engine.Outcome, r *engine.Refusal, now int64) {
	p.ended = append(p.ended, ended{j, o, r})
}

// has reports whether j was handed over as granted.
func (p *party) has(j *engine.Job) bool { return slices.Contains(p.granted, j) }

type replicaNode struct {
	r   *Remote
	e   *engine.Engine
	p   *party
	out *Outbox
}

type testCluster struct {
	t      *testing.T
	cfg    engine.Config
	leader *Leader
	le     *engine.Engine
	lp     *party
	lout   *Outbox
	nodes  map[string]*replicaNode
	now    int64
	// sent counts the messages carried, by kind.
	sent map[MsgKind]int
}

// queueOfOne returns a cluster in its first term, every engine of one
// slot and a queue of one, whose leader has capacity leaderCap, and its
// replica "a", of capacity 1.
func queueOfOne(t *testing.T, leaderCap int) (*testCluster, *replicaNode) {
	cfg := testEngineConfig(1)
	cfg.MaxQueue = 1
	c := newTestCluster(t, cfg, leaderCap, "a")
	c.leader.Begin(1, map[string]int{"a": 1}, c.tick())
	c.flush()
	return c, c.nodes["a"]
}

func testEngineConfig(slots int) engine.Config {
	return engine.Config{MaxConcurrency: slots, CostAlpha: 0.3, DefaultCost: 1, IdleTTL: 600e6}
}

// newTestCluster makes a leader "l" of capacity leaderCap and replicas
// named as in caps, every engine limited to slots; the term is not begun.
func newTestCluster(t *testing.T, cfg engine.Config, leaderCap int, names ...string) *testCluster {
	c := &testCluster{t: t, cfg: cfg, lp: &party{}, lout: &Outbox{}, nodes: map[string]*replicaNode{},
		now: 1, sent: map[MsgKind]int{}}
	c.le = engine.New(cfg, nil)
	c.leader = NewLeader("l", leaderCap, c.le, c.lp, c.lout)
	for _, name := range names {
		n := &replicaNode{e: engine.New(cfg, nil), p: &party{}, out: &Outbox{}}
		n.r = NewRemote(name, n.e, n.p, n.out, 1)
		c.nodes[name] = n
	}
	return c
}

// flush carries every message until none is left, and checks every
// engine's invariants.
func (c *testCluster) flush() {
	defer func() {
		require.NoError(c.t, c.le.Verify(c.now), "the leader's engine")
		for name, n := range c.nodes {
			require.NoError(c.t, n.e.Verify(c.now), "replica %s's engine", name)
		}
	}()
	for moved := true; moved; {
		moved = false
		if msgs := c.lout.Take(); len(msgs) > 0 {
			moved = true
			for _, m := range msgs {
				c.sent[m.Kind]++
				if n := c.nodes[m.Replica]; n != nil {
					n.r.Receive([]Msg{m}, c.now)
				}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(c.nodes)) {
			if msgs := c.nodes[name].out.Take(); len(msgs) > 0 {
				moved = true
				for _, m := range msgs {
					c.sent[m.Kind]++
				}
				c.leader.Receive(msgs, c.now)
			}
		}
	}
}

// submitLeader admits a job of the leader's process, and reports whether
// it started with the answer.
func (c *testCluster) submitLeader(j *engine.Job, key string) bool {
	c.t.Helper()
	startsNow, r := c.leader.Enqueue(j, engine.Desc{Key: key}, nil, c.tick())
	require.Nil(c.t, r)
	if startsNow {
		c.lp.granted = append(c.lp.granted, j)
	}
	return startsNow
}

func (c *testCluster) submit(name string, j *engine.Job, key string) {
	c.t.Helper()
	startsNow, r := c.nodes[name].r.Enqueue(j, engine.Desc{Key: key}, nil, c.tick())
	require.Nil(c.t, r)
	require.False(c.t, startsNow, "a replica's job never starts in the call")
}

func (c *testCluster) tick() int64 { c.now += 1000; return c.now }

// running counts the jobs running on each replica as the replicas see
// them, and in all.
func (c *testCluster) running(started map[*engine.Job]bool) (perReplica map[string]int, total int) {
	perReplica = map[string]int{}
	for j := range started {
		if j.Running() {
			total++
		}
	}
	for name, n := range c.nodes {
		for _, j := range n.p.granted {
			if j.Running() {
				perReplica[name]++
			}
		}
	}
	for _, j := range c.lp.granted {
		if j.Running() {
			perReplica["l"]++
		}
	}
	return perReplica, total
}

// The cluster's slots are the leader's: 3 in all across three replicas
// of 2 each, however many jobs each asks for, and each replica's capacity
// bounds what runs there; every job runs once, in the end.
func TestClusterGlobalLimit(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(3), 2, "a", "b")
	var lj, aj, bj [4]engine.Job
	for i := range 4 {
		c.submit("a", &aj[i], "k")
		c.submit("b", &bj[i], "k")
	}
	assert.Zero(t, c.sent[Ask]+len(c.nodes["a"].out.Take()), "no leader known: nothing is sent")
	c.leader.Begin(1, map[string]int{"a": 2, "b": 2}, c.tick())
	startedAtOnce := c.submitLeader(&lj[0], "k")
	assert.False(t, startedAtOnce, "the term waits for every replica")
	c.flush()
	assert.Equal(t, 2, c.sent[Hello], "each replica said hello")
	assert.Equal(t, 8, c.sent[Ask], "each replica asked for its four jobs in its Hello")
	for i := 1; i < 4; i++ {
		c.submitLeader(&lj[i], "k")
	}
	c.leader.Grant(c.tick())
	c.flush()
	all := map[*engine.Job]bool{}
	for i := range 4 {
		all[&lj[i]], all[&aj[i]], all[&bj[i]] = true, true, true
	}
	per, total := c.running(all)
	assert.Equal(t, 3, total, "three slots in the cluster")
	for name, n := range per {
		assert.LessOrEqual(t, n, 2, "replica %s over its capacity", name)
	}
	// End whatever runs, one at a time, until all twelve ran. Each time,
	// the slots fill again as far as the jobs left, each replica's at
	// most 2, allow.
	left := map[string]int{"l": 4, "a": 4, "b": 4}
	ran := 0
	for ran < 12 {
		var j *engine.Job
		var fin func()
		for _, x := range c.lp.granted {
			if x.Running() {
				j, fin = x, func() { c.leader.Finish(x, engine.Completed, c.tick()); c.leader.Grant(c.now); left["l"]-- }
				break
			}
		}
		for _, name := range []string{"a", "b"} {
			n := c.nodes[name]
			for _, x := range n.p.granted {
				if j == nil && x.Running() {
					j, fin = x, func() { n.r.Finish(x, engine.Completed, c.tick()); left[name]-- }
				}
			}
		}
		require.NotNil(t, j, "%d ran: nothing runs, yet jobs wait", ran)
		fin()
		ran++
		c.flush()
		per, total = c.running(all)
		assert.Equal(t, min(3, min(2, left["l"])+min(2, left["a"])+min(2, left["b"])), total,
			"after %d ended, the slots are full again, as far as the jobs left allow: %v", ran, left)
		for name, n := range per {
			assert.LessOrEqual(t, n, 2, "replica %s over its capacity", name)
		}
	}
	assert.True(t, c.leader.Idle())
	assert.Equal(t, 0, c.le.Summary().Running+c.le.Summary().Pending)
}

// A new leader grants nothing until every live replica said what it
// runs; a job running under the old leader counts against the limits
// from the new leader's first grant.
func TestClusterNewTermWaitsForEveryReplica(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(2), 2, "a", "b")
	c.leader.Begin(1, map[string]int{"a": 2, "b": 2}, c.tick())
	c.flush()
	var aj [2]engine.Job
	c.submit("a", &aj[0], "k")
	c.flush()
	require.True(t, c.nodes["a"].p.has(&aj[0]), "granted in term 1")

	// The leader dies; a new one, with a fresh engine, begins term 2.
	c.le = engine.New(c.cfg, nil)
	c.lp, c.lout = &party{}, &Outbox{}
	c.leader = NewLeader("l", 2, c.le, c.lp, c.lout)
	c.leader.Begin(2, map[string]int{"a": 2, "b": 2}, c.tick())
	var lj [2]engine.Job
	assert.False(t, c.submitLeader(&lj[0], "k"))
	// Only b answers: a's job is not known yet, and nothing starts.
	for _, m := range c.lout.Take() {
		if m.Replica == "b" {
			c.nodes["b"].r.Receive([]Msg{m}, c.now)
		} else {
			c.lout.Put(m)
		}
	}
	c.leader.Receive(c.nodes["b"].out.Take(), c.tick())
	assert.False(t, lj[0].Running(), "a has not answered: nothing starts")
	// a answers: its running job is adopted, and one slot of two is left.
	c.flush()
	assert.True(t, lj[0].Running(), "granted once every replica answered")
	assert.Equal(t, 2, c.le.Summary().Running, "a's job counts, adopted")
	assert.False(t, c.submitLeader(&lj[1], "k"), "no slot left")
	c.submit("a", &aj[1], "k")
	c.flush()
	assert.False(t, c.nodes["a"].p.has(&aj[1]))
	c.nodes["a"].r.Finish(&aj[0], engine.Completed, c.tick())
	c.flush()
	assert.True(t, lj[1].Running() || c.nodes["a"].p.has(&aj[1]), "the adopted job's end frees its slot")
	assert.Equal(t, 2, c.le.Summary().Running)
}

// A replica declared dead loses its jobs: the slots they held are free,
// and its later messages are dropped.
func TestClusterRemovedReplica(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(2), 2, "a")
	c.leader.Begin(1, map[string]int{"a": 2}, c.tick())
	var aj [2]engine.Job
	c.submit("a", &aj[0], "k")
	c.submit("a", &aj[1], "k")
	c.flush()
	require.Equal(t, 2, c.le.Summary().Running)
	var lj engine.Job
	assert.False(t, c.submitLeader(&lj, "k"))
	c.leader.RemoveReplica("a", c.tick())
	assert.True(t, lj.Running(), "a's slots are free")
	assert.Equal(t, 1, c.le.Summary().Running)
	c.nodes["a"].r.Finish(&aj[0], engine.Completed, c.tick())
	c.flush()
	assert.Equal(t, 1, c.le.Summary().Running, "a dead replica's end changes nothing")
}

// The leader's admission limits and start deadlines hold for a replica's
// jobs: a refusal and an expiry come back as ends, with their reasons.
func TestClusterRefusedAndExpired(t *testing.T) {
	c, n := queueOfOne(t, 1)
	var aj [3]engine.Job
	for i := range aj {
		c.submit("a", &aj[i], "k")
	}
	c.flush()
	require.True(t, n.p.has(&aj[0]))
	require.Len(t, n.p.ended, 1)
	assert.Equal(t, &aj[2], n.p.ended[0].j)
	require.NotNil(t, n.p.ended[0].r)
	assert.Equal(t, engine.RefusedFull, n.p.ended[0].r.Reason, "the queue holds one")
	assert.Equal(t, engine.StateDone, aj[2].State())

	n.r.Cancel(&aj[1], c.tick()) // room in the queue
	var late engine.Job
	_, r := n.r.Enqueue(&late, engine.Desc{Key: "k"}, &engine.Times{StartBy: c.now + 5000}, c.tick())
	require.Nil(t, r)
	c.flush()
	at, ok := c.leader.NextDue()
	require.True(t, ok)
	c.now = at
	assert.Empty(t, c.leader.Due(at), "the leader's own jobs: none expired")
	c.flush()
	require.Len(t, n.p.ended, 2)
	assert.Equal(t, ended{&late, engine.Expired, nil}, n.p.ended[1])
}

// Messages of an older term are dropped, both ways; a Lost link makes
// the replica say everything again, which replaces what the leader knew.
func TestClusterTermsAndLoss(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(4), 4, "a")
	c.leader.Begin(3, map[string]int{"a": 4}, c.tick())
	c.flush()
	n := c.nodes["a"]
	var aj [2]engine.Job
	c.submit("a", &aj[0], "k")
	c.submit("a", &aj[1], "k")
	n.r.Receive([]Msg{{Kind: Grant, Term: 2, Replica: "a", Seq: aj[1].Seq()}}, c.tick())
	assert.False(t, aj[1].Running(), "a grant of an older term is dropped")
	c.leader.Receive([]Msg{{Kind: Ask, Term: 2, Replica: "a", Seq: 99}}, c.tick())
	assert.Equal(t, 0, c.le.Summary().Running+c.le.Summary().Pending, "an ask of an older term is dropped")
	c.flush()
	assert.Equal(t, 2, c.le.Summary().Running)
	n.r.Lost(c.tick())
	c.flush()
	assert.Equal(t, 2, c.le.Summary().Running, "said again, counted once")
	n.r.Finish(&aj[0], engine.Completed, c.tick())
	n.r.Finish(&aj[1], engine.Completed, c.tick())
	c.flush()
	assert.True(t, c.leader.Idle())
	assert.Equal(t, 0, c.le.Summary().Running)
}

// A job the replica gives up while its grant is on the way never runs,
// and the leader frees its slot.
func TestClusterCancelRacesGrant(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(1), 1, "a")
	c.leader.Begin(1, map[string]int{"a": 1}, c.tick())
	c.flush()
	n := c.nodes["a"]
	var aj engine.Job
	c.submit("a", &aj, "k")
	c.leader.Receive(n.out.Take(), c.tick()) // the leader grants; the grant is on its way
	n.r.Cancel(&aj, c.tick())
	c.flush()
	assert.False(t, n.p.has(&aj), "given up first: the grant is dropped")
	assert.Equal(t, 0, c.le.Summary().Running, "the leader freed the slot")
	var lj engine.Job
	assert.True(t, c.submitLeader(&lj, "k"))
}

// A replica counts its own jobs, and its own busy and idle time: busy
// while at least one of its jobs runs, however many, idle otherwise.
func TestClusterReplicaUsage(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(4), 4, "a")
	c.leader.Begin(1, map[string]int{"a": 4}, c.tick())
	c.flush()
	n := c.nodes["a"]
	var aj [2]engine.Job
	c.submit("a", &aj[0], "k")
	c.submit("a", &aj[1], "k")
	c.flush() // both granted at c.now
	granted := c.now
	f := n.r.Figures(10, nil)
	assert.Equal(t, 2, f.Summary.Running, "the replica's figures count its own jobs")
	assert.Equal(t, uint64(2), f.Summary.Submitted)
	running, busy, idle := n.r.Usage(c.now)
	assert.Equal(t, 2, running)
	assert.Equal(t, int64(0), busy)
	assert.Equal(t, granted-1, idle, "idle from its beginning, at 1, to the grants")
	n.r.Finish(&aj[0], engine.Completed, c.tick())
	n.r.Finish(&aj[1], engine.Completed, c.tick())
	ended := c.now
	c.tick()
	f = n.r.Figures(10, nil)
	assert.Equal(t, 0, f.Summary.Running+f.Summary.Pending)
	assert.Equal(t, uint64(2), f.Summary.Completed)
	running, busy, idle = n.r.Usage(c.now)
	assert.Equal(t, 0, running)
	assert.Equal(t, ended-granted, busy, "busy from the first grant to the last end")
	assert.Equal(t, c.now-1-busy, idle)
}

// A replica's caller can wait for the leader's answer to its job: true
// once it is granted or admitted to wait, false once it is refused.
func TestClusterAdmission(t *testing.T) {
	c, n := queueOfOne(t, 1)
	var x [3]engine.Job
	var answers [3]<-chan bool
	for i := range x {
		c.submit("a", &x[i], "k")
		answers[i] = n.r.Admission(&x[i])
	}
	for i := range answers {
		select {
		case <-answers[i]:
			t.Fatalf("job %d answered before the leader heard of it", i)
		default:
		}
	}
	c.flush()
	assert.True(t, <-answers[0], "granted")
	assert.True(t, <-answers[1], "admitted to wait")
	assert.False(t, <-answers[2], "refused: the queue holds one")
	assert.Equal(t, 1, c.sent[Admitted])
}

// An Ask at once (a replica's TryRunSync, Remote.AskNow) is granted in the
// leader's answer, or ended refused with RefusedWouldWait: when the
// cluster's slots are taken, when its replica's are, and when it comes in
// a Hello (a term began between the ask and the answer). A job so
// refused is counted neither cancelled nor expired.
func TestClusterAskAtOnce(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(3), 1, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	var early engine.Job
	a.r.AskNow()
	c.submit("a", &early, "k")
	c.leader.Begin(1, map[string]int{"a": 2, "b": 1}, c.tick())
	c.flush()
	require.Len(t, a.p.ended, 1, "asked before the term: its Hello's ask is refused")
	assert.Equal(t, engine.RefusedWouldWait, a.p.ended[0].r.Reason)

	askNow := func(n *replicaNode, j *engine.Job) {
		n.r.AskNow()
		c.submit(n.r.name, j, "k")
		c.flush()
	}
	var first, second, third, fourth engine.Job
	askNow(b, &first)
	assert.True(t, b.p.has(&first), "a free slot: granted in the answer")
	askNow(b, &second)
	assert.False(t, b.p.has(&second))
	require.Len(t, b.p.ended, 1, "b's one slot is taken")
	assert.Equal(t, ended{&second, engine.NotRun, &engine.Refusal{Reason: engine.RefusedWouldWait}}, b.p.ended[0])
	askNow(a, &third)
	assert.True(t, a.p.has(&third), "a has room, and so has the cluster")
	var held engine.Job
	c.submit("a", &held, "k") // asked as usual: granted, the cluster's third slot
	c.flush()
	require.True(t, a.p.has(&held))
	askNow(a, &fourth)
	require.Len(t, a.p.ended, 2, "the cluster's three slots are taken")
	assert.Equal(t, engine.RefusedWouldWait, a.p.ended[1].r.Reason)
	assert.Zero(t, a.r.counts.Cancelled+b.r.counts.Cancelled+a.r.counts.Expired+b.r.counts.Expired)

	// A plain ask still waits its turn.
	var waits engine.Job
	c.submit("b", &waits, "k")
	c.flush()
	assert.Len(t, b.p.ended, 1)
	assert.False(t, b.p.has(&waits))
}

// A replica's batch (BeginBatch, EndBatch: SubmitMany) is admitted all or
// none: one batch of messages carries it, and when the queue has no room for every
// job of it, each is ended with the refusal, none admitted; a priority
// raised within the batch rides on its Ask.
func TestClusterBatchAllOrNone(t *testing.T) {
	cfg := testEngineConfig(1)
	cfg.MaxQueue = 3
	c := newTestCluster(t, cfg, 1, "a")
	a := c.nodes["a"]
	c.leader.Begin(1, map[string]int{"a": 1}, c.tick())
	c.flush()
	var runs engine.Job
	c.submit("a", &runs, "k") // takes the one slot: the rest wait
	c.flush()
	require.True(t, a.p.has(&runs))

	batch := func(jobs []engine.Job, raise int) {
		a.r.BeginBatch()
		for i := range jobs {
			c.submit("a", &jobs[i], "k")
		}
		if raise > 0 {
			a.r.Raise(&jobs[len(jobs)-1], raise, c.now)
		}
		asks, raises := c.sent[Ask], c.sent[Raise]
		assert.Empty(t, a.out.Take(), "nothing asked before the batch is whole")
		a.r.EndBatch(c.tick())
		c.flush()
		assert.Equal(t, len(jobs), c.sent[Ask]-asks, "one Ask a job")
		assert.Equal(t, raises, c.sent[Raise], "the raise rode on the Ask")
	}
	two := make([]engine.Job, 2)
	batch(two, 90)
	assert.Empty(t, a.p.ended, "room for two: admitted")
	assert.Equal(t, 2, c.le.Summary().Pending)
	three := make([]engine.Job, 2)
	batch(three, 0)
	require.Len(t, a.p.ended, 2, "room for one more, not two: both refused")
	for i, e := range a.p.ended {
		assert.Equal(t, &three[i], e.j)
		assert.Equal(t, engine.RefusedFull, e.r.Reason)
	}
	assert.Equal(t, 2, c.le.Summary().Pending, "none of them admitted")
	one := make([]engine.Job, 1)
	batch(one, 0)
	assert.Len(t, a.p.ended, 2, "room for one: admitted")
	assert.Equal(t, 3, c.le.Summary().Pending)

	// The raised job comes first once the slot frees.
	c.nodes["a"].r.Finish(&runs, engine.Completed, c.tick())
	c.flush()
	assert.True(t, a.p.has(&two[1]), "raised within its batch, it starts first")
	assert.False(t, a.p.has(&two[0]))
}

// Jobs a replica enqueued before it knew a leader were never admitted:
// its first Hello asks for them after its list, as new, so the leader
// admits them within the queue's limits, a batch all or none.
func TestClusterJobsBeforeTheTerm(t *testing.T) {
	cfg := testEngineConfig(1)
	cfg.MaxQueue = 2
	c := newTestCluster(t, cfg, 1, "a")
	a := c.nodes["a"]
	three := make([]engine.Job, 3)
	a.r.BeginBatch()
	for i := range three {
		c.submit("a", &three[i], "k")
	}
	a.r.EndBatch(c.now)
	var alone engine.Job
	c.submit("a", &alone, "k")
	assert.Empty(t, a.out.Take(), "no leader known: nothing is sent")
	c.leader.Begin(1, map[string]int{"a": 1}, c.tick())
	c.flush()
	assert.Equal(t, 1, c.sent[Hello])
	require.Len(t, a.p.ended, 3, "the batch of three has no room in a queue of two: refused whole")
	for i, e := range a.p.ended {
		assert.Equal(t, &three[i], e.j)
		assert.Equal(t, engine.RefusedFull, e.r.Reason)
	}
	assert.True(t, a.p.has(&alone), "the job alone is admitted, and starts")
}

// A replica's job that waits there for the jobs it runs after (Park) is
// admitted by the leader within the queue's limits and counted against
// them, in a Hello too, but not queued; released, it is queued as
// admitted then, keeping its submission time. Refused with its batch,
// given up, expired or unrun, it counts no more, and a release the leader
// does not hold is dropped.
func TestClusterParked(t *testing.T) {
	c, a := queueOfOne(t, 1)
	var running, held, queued engine.Job
	c.submit("a", &running, "k")
	c.flush()
	require.True(t, a.p.has(&running))

	a.r.Park()
	c.submit("a", &held, "k")
	assert.True(t, a.r.Parked(&held))
	admitted := a.r.Admission(&held)
	c.flush()
	assert.True(t, <-admitted, "admitted by the leader")
	assert.Equal(t, 1, a.r.Figures(0, nil).Waiting[engine.WhyDependency], "it waits for the jobs it runs after")
	assert.Equal(t, 0, c.le.Summary().Pending, "not queued")
	c.submit("a", &queued, "k")
	c.flush()
	require.Len(t, a.p.ended, 1)
	assert.Equal(t, ended{&queued, engine.NotRun, &engine.Refusal{Reason: engine.RefusedFull, Limit: 1, Size: 1}}, a.p.ended[0],
		"the queue of one holds the job that waits")
	a.r.Lost(c.tick())
	c.flush()
	assert.Len(t, c.leader.held, 1, "counted again from the Hello")

	a.r.Release(&held, c.tick())
	assert.False(t, a.r.Parked(&held))
	c.flush()
	assert.Len(t, a.p.ended, 1, "not refused")
	assert.Empty(t, c.leader.held)
	assert.Equal(t, 1, c.le.Summary().Pending, "queued")
	s := c.leader.stand[standKey{"a", held.Seq()}]
	require.NotNil(t, s)
	assert.Equal(t, held.Submitted(), s.j.Submitted(), "its submission time, kept")

	var batched, other engine.Job
	a.r.BeginBatch()
	a.r.Park()
	c.submit("a", &batched, "k")
	c.submit("a", &other, "k")
	a.r.EndBatch(c.now)
	c.flush()
	require.Len(t, a.p.ended, 3, "the batch had no room: refused whole")
	assert.Equal(t, &batched, a.p.ended[1].j)
	assert.Zero(t, a.r.parked)
	m := Msg{Kind: Ask, Term: 1, Replica: "a", Seq: batched.Seq(), Desc: engine.Desc{Key: "k"}, Flags: AskAdmitted}
	c.leader.Receive([]Msg{m}, c.tick())
	assert.Nil(t, c.leader.stand[standKey{"a", batched.Seq()}], "a release the leader does not hold is dropped")

	a.r.Finish(&running, engine.Completed, c.tick()) // the queued one runs: the queue is empty
	c.flush()
	var cancelled, expires, unrun engine.Job
	for _, j := range []*engine.Job{&cancelled, &unrun} {
		a.r.Park()
		c.submit("a", j, "k")
		c.flush()
		require.Len(t, c.leader.held, 1)
		if j == &cancelled {
			a.r.Cancel(j, c.tick())
		} else {
			a.r.Unrun(j, c.tick())
		}
		c.flush()
		assert.Empty(t, c.leader.held, "given up: it counts no more")
	}
	assert.Equal(t, engine.DependencyFailed, unrun.Outcome())

	a.r.Park()
	deadline := c.now + 5000
	_, r := a.r.Enqueue(&expires, engine.Desc{Key: "k"}, &engine.Times{StartBy: deadline}, c.tick())
	require.Nil(t, r)
	c.flush()
	at, ok := a.r.NextDue()
	require.True(t, ok)
	assert.Equal(t, deadline, at, "its start deadline")
	assert.Empty(t, a.r.Due(at-1))
	assert.Equal(t, []*engine.Job{&expires}, a.r.Due(at))
	assert.Equal(t, engine.Expired, expires.Outcome())
	c.flush()
	assert.Empty(t, c.leader.held)
	_, ok = a.r.NextDue()
	assert.False(t, ok, "nothing waits")
	counts := a.r.Figures(0, nil).Summary.Counters
	assert.Equal(t, uint64(1), counts.Expired)
	assert.Equal(t, uint64(1), counts.DependencyFailed)

	var waits engine.Job // a batch whose first job waits, with room
	a.r.Finish(&held, engine.Completed, c.tick())
	c.flush()
	a.r.BeginBatch()
	a.r.Park()
	c.submit("a", &waits, "k")
	a.r.EndBatch(c.now)
	c.flush()
	assert.Len(t, c.leader.held, 1, "held, not queued")
	assert.False(t, waits.Running())
	a.r.Cancel(&waits, c.tick())
	c.flush()
	assert.Empty(t, c.leader.held)

	var orphan engine.Job
	a.r.Park()
	c.submit("a", &orphan, "k")
	c.flush()
	require.Len(t, c.leader.held, 1)
	c.leader.RemoveReplica("a", c.tick())
	assert.Empty(t, c.leader.held, "a replica removed: its jobs count no more")
}
