package decide

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/engine"
)

func (c *testCluster) runningOn(names ...string) int {
	n := 0
	for _, name := range names {
		for _, j := range c.nodes[name].p.granted {
			if j.Running() {
				n++
			}
		}
	}
	return n
}

// A Hello is one batch: the leader never grants on half of it (the
// replica's running jobs forgotten, not yet adopted again).
func TestClusterHelloIsOneBatch(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(2), 0, "a", "b")
	c.leader.Begin(1, map[string]int{"a": 2, "b": 2}, c.tick())
	c.flush()
	var aj [2]engine.Job
	var bj engine.Job
	c.submit("a", &aj[0], "k")
	c.submit("a", &aj[1], "k")
	c.flush()
	c.submit("b", &bj, "k")
	c.flush()
	require.Equal(t, 2, c.runningOn("a", "b"))
	a := c.nodes["a"]
	a.r.Lost(c.tick())
	a.out.Put(Msg{Kind: Raise, Term: 1, Replica: "a", Seq: 99}) // put after: never taken alone with the Hello's head
	msgs := a.out.Take()
	require.Equal(t, Hello, msgs[0].Kind)
	require.Len(t, msgs, 4, "the Hello, its two jobs, then what came after")
	c.leader.Receive(msgs, c.tick())
	c.flush()
	assert.LessOrEqual(t, c.runningOn("a", "b"), 2, "MaxConcurrency 2 exceeded across replicas") // 3
	assert.LessOrEqual(t, c.le.Summary().Running, 2)
}

// A grant that crosses a Hello is dropped: the leader decided it on what
// the Hello replaced, and decides the job again.
func TestClusterGrantCrossesHello(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(1), 0, "a", "b")
	c.leader.Begin(1, map[string]int{"a": 1, "b": 1}, c.tick())
	c.flush()
	a, b := c.nodes["a"], c.nodes["b"]
	var x, y engine.Job
	c.submit("a", &x, "ka")
	c.leader.Receive(a.out.Take(), c.tick()) // the leader grants x
	inFlight := c.lout.Take()
	require.Equal(t, Grant, inFlight[0].Kind)
	_, r := b.r.Enqueue(&y, engine.Desc{Key: "kb", Priority: 90}, nil, c.tick())
	require.Nil(t, r)
	c.leader.Receive(b.out.Take(), c.tick())
	a.r.Lost(c.tick())                       // Hello: x as Ask
	c.leader.Receive(a.out.Take(), c.tick()) // forgets x's grant, grants y
	a.r.Receive(inFlight, c.tick())          // the old grant of x arrives
	c.flush()
	assert.LessOrEqual(t, c.runningOn("a", "b"), 1, "MaxConcurrency 1 exceeded") // 2
	assert.False(t, x.Running(), "its grant crossed the Hello")
	require.True(t, y.Running())
	b.r.Finish(&y, engine.Completed, c.tick())
	c.flush()
	require.True(t, x.Running(), "granted again, once y ended")
	a.r.Finish(&x, engine.Completed, c.tick())
	c.flush()
	var z engine.Job
	c.submit("b", &z, "kb")
	c.flush()
	assert.True(t, z.Running(), "nothing runs, yet z waits for ever (leader Running=%d)", c.le.Summary().Running) // 1
}

// So is a refusal that crosses a Hello: the job, asked for again, is
// the leader's to decide, and it never holds a slot for no one.
func TestClusterEndedCrossesHello(t *testing.T) {
	c, a := queueOfOne(t, 0)
	var x [3]engine.Job
	for i := range x {
		c.submit("a", &x[i], "k")
	}
	c.leader.Receive(a.out.Take(), c.tick()) // x0 granted, x1 waits, x2 refused
	inFlight := c.lout.Take()
	a.r.Lost(c.tick())
	c.leader.Receive(a.out.Take(), c.tick()) // x2 re-asked: admitted past MaxQueue
	a.r.Receive(inFlight, c.tick())
	c.flush()
	assert.Empty(t, a.p.ended, "the refusal crossed the Hello: dropped")
	a.r.Finish(&x[0], engine.Completed, c.tick())
	c.flush()
	require.True(t, x[1].Running())
	a.r.Finish(&x[1], engine.Completed, c.tick())
	c.flush()
	require.True(t, x[2].Running(), "asked for again in the Hello, it runs in its turn")
	a.r.Finish(&x[2], engine.Completed, c.tick())
	c.flush()
	var z engine.Job
	c.submit("a", &z, "k")
	c.flush()
	assert.True(t, z.Running(), "a runs nothing, yet z waits for ever (leader Running=%d)", c.le.Summary().Running)
}

// A Resync lost on the way is asked again: by the leader's nudge each
// period, and at once when a replica speaks in an older term.
func TestClusterLostResync(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(4), 0, "a", "b")
	c.leader.Begin(1, map[string]int{"a": 2, "b": 2}, c.tick())
	c.flush()
	c.le = engine.New(c.cfg, nil)
	c.lp, c.lout = &party{}, &Outbox{}
	c.leader = NewLeader("l", 0, c.le, c.lp, c.lout)
	c.leader.Begin(2, map[string]int{"a": 2, "b": 2}, c.tick())
	for _, m := range c.lout.Take() {
		if m.Replica == "a" {
			c.nodes["a"].r.Receive([]Msg{m}, c.now)
		} // b's Resync is lost
	}
	c.nodes["b"].r.Lost(c.tick()) // hello in term 1: dropped
	var aj engine.Job
	c.submit("a", &aj, "k")
	c.flush()
	c.flush()
	if !aj.Running() {
		c.leader.Nudge(c.tick(), 0) // every period
		c.flush()
	}
	assert.True(t, aj.Running(), "4 free slots, both replicas heartbeat, yet a's job waits for ever")
}

// A replica that registers again under its name (a restart) is a new
// replica: its former self's jobs are lost, and the new one is asked for
// its own.
func TestClusterRestartUnderTheSameName(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(1), 0, "a")
	c.leader.Begin(1, map[string]int{"a": 1}, c.tick())
	c.leader.AddReplica("a", 1, 100, c.tick()) // the registry's first reading
	c.flush()
	var old engine.Job
	c.submit("a", &old, "k")
	c.flush()
	require.True(t, old.Running())
	n := &replicaNode{e: engine.New(c.cfg, nil), p: &party{}, out: &Outbox{}}
	n.r = NewRemote("a", n.e, n.p, n.out, 1) // kill -9, restarted as "a"
	c.nodes["a"] = n
	c.leader.AddReplica("a", 1, 200, c.tick()) // registered again
	var j engine.Job
	c.submit("a", &j, "k")
	c.flush()
	assert.True(t, j.Running(), "the restarted replica's job waits for ever (leader Running=%d)", c.le.Summary().Running)
}

// A job's deadline survives a failover: asked for again, past it, the job
// ends Expired instead of running.
func TestClusterDeadlineAcrossFailover(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(1), 0, "a")
	c.leader.Begin(1, map[string]int{"a": 1}, c.tick())
	c.flush()
	a := c.nodes["a"]
	var busy, x engine.Job
	c.submit("a", &busy, "k")
	c.flush()
	_, r := a.r.Enqueue(&x, engine.Desc{Key: "k"}, &engine.Times{StartBy: c.now + 5000}, c.tick())
	require.Nil(t, r)
	c.flush()
	c.now += 100000 // leader dies; x's deadline passes
	le := engine.New(c.cfg, nil)
	lout := &Outbox{}
	leader := NewLeader("l", 0, le, &party{}, lout)
	const origin = 1 << 50 // a new leader's clock starts far from 0, as internal/cluster's does
	leader.Begin(2, map[string]int{"a": 1}, origin+1)
	a.r.Receive(lout.Take(), c.now)
	leader.Receive(a.out.Take(), origin+2)
	a.r.Finish(&busy, engine.Completed, c.tick())
	leader.Receive(a.out.Take(), origin+3) // busy's end frees the slot: x's deadline comes first
	a.r.Receive(lout.Take(), c.now)
	assert.False(t, x.Running(), "past its deadline, granted instead of ending Expired")
	require.Len(t, a.p.ended, 1)
	assert.Equal(t, engine.Expired, a.p.ended[0].o)
}

// A replica added while a term waits for Begin's replicas holds back only
// its own jobs: its Hello does not begin the term while one of Begin's
// has not answered.
func TestClusterAddedWhileTheTermWaits(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(4), 0, "a", "b", "c")
	c.leader.Begin(1, map[string]int{"a": 2, "b": 2}, c.tick())
	c.leader.AddReplica("c", 2, 7, c.tick())
	for _, m := range c.lout.Take() {
		if m.Replica != "b" { // b's Resync is slow to arrive
			c.nodes[m.Replica].r.Receive([]Msg{m}, c.now)
		}
	}
	var aj engine.Job
	c.submit("a", &aj, "k")
	c.leader.Receive(c.nodes["a"].out.Take(), c.tick())
	c.leader.Receive(c.nodes["c"].out.Take(), c.tick())
	c.flush()
	assert.False(t, aj.Running(), "b has not answered: nothing may start")
	c.leader.Nudge(c.tick(), 0)
	c.flush()
	assert.True(t, aj.Running(), "b answered")
}

// A replica that has not answered is asked again only once the time
// given has passed since it was last asked: asked twice, it would answer
// twice, and its second Hello would make it drop what the leader sent it
// after reading the first.
func TestClusterNudgeWaits(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(4), 0, "a")
	asked := c.tick()
	c.leader.Begin(1, map[string]int{"a": 2}, asked)
	resyncs := func() int {
		n := 0
		for _, m := range c.lout.Take() {
			if m.Kind == Resync && m.Replica == "a" {
				n++
			}
		}
		return n
	}
	require.Equal(t, 1, resyncs())
	c.leader.Nudge(asked+999, 1000)
	assert.Zero(t, resyncs(), "asked 999µs ago: its Hello may be on its way")
	c.leader.Nudge(asked+1000, 1000)
	assert.Equal(t, 1, resyncs(), "asked 1000µs ago: asked again")
	c.leader.Nudge(asked+1500, 1000)
	assert.Zero(t, resyncs(), "the time runs from the last ask")
}
