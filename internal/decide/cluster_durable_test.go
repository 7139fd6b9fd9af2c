package decide

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/engine"
)

// The leader's Keeper, as the tests see it: the durable jobs it was
// granted, the attempts' ends and the replicas' runs it heard of.
type keeperParty struct {
	party
	ready int
	done  []Msg
	runs  map[string]map[int64]Msg // the last Runs heard, by replica (nil: removed)
	heard map[string]int           // how many times Runs was heard, by replica
}

func (k *keeperParty) Done(replica string, m *Msg, now int64) { k.done = append(k.done, *m) }
func (k *keeperParty) Runs(replica string, runs map[int64]Msg, now int64) {
	if k.runs == nil {
		k.runs, k.heard = map[string]map[int64]Msg{}, map[string]int{}
	}
	k.runs[replica] = maps.Clone(runs)
	k.heard[replica]++
}
func (k *keeperParty) Ready(now int64) { k.ready++ }

// A replica's run-time layer that runs durable attempts: what it was
// asked to run.
type runnerParty struct {
	party
	ran []Msg
}

func (r *runnerParty) RunDurable(id int64, attempt int, typ string, args []byte, now int64) {
	r.ran = append(r.ran, Msg{Seq: uint64(id), Attempt: attempt, Desc: engine.Desc{Type: typ}, Args: args})
}

// newDurableCluster makes a leader "l", whose Keeper keeps the durable
// jobs, and replicas of the handler types named, each of capacity
// capacity; the term is begun with all of them, and every Hello carried.
func newDurableCluster(t *testing.T, capacity int, types map[string][]string) (*testCluster, *keeperParty, map[string]*runnerParty) {
	c := newTestCluster(t, testEngineConfig(10), 0)
	k := &keeperParty{}
	c.lp = &k.party
	c.leader = NewLeader("l", 0, c.le, k, c.lout)
	for _, typ := range []string{"mail", "pdf"} {
		require.NoError(t, c.le.RegisterType(typ, engine.Type{}))
	}
	runners := map[string]*runnerParty{}
	caps := map[string]int{}
	for _, name := range slices.Sorted(maps.Keys(types)) {
		rp := &runnerParty{}
		n := &replicaNode{e: engine.New(c.cfg, nil), p: &rp.party, out: &Outbox{}}
		n.r = NewRemote(name, n.e, rp, n.out, 1)
		n.r.SetTypes(types[name])
		c.nodes[name], runners[name], caps[name] = n, rp, capacity
	}
	c.leader.Begin(1, caps, c.tick())
	assert.Zero(t, k.ready, "ready before the replicas answered")
	c.flush()
	require.Equal(t, 1, k.ready, "ready once every replica answered")
	return c, k, runners
}

// enqueueDurable admits a durable job of type typ at the leader, as its
// Keeper does, and returns it.
func (c *testCluster) enqueueDurable(typ string) *engine.Job {
	c.t.Helper()
	j := new(engine.Job)
	startsNow, r := c.leader.Enqueue(j, engine.Desc{Type: typ}, &engine.Times{Submitted: c.now}, c.tick())
	require.Nil(c.t, r)
	require.False(c.t, startsNow)
	return j
}

// run sends job j's attempt to the replica the engine placed it on, as
// the Keeper does, with the Run taken as it was granted (or run, if
// given).
func (c *testCluster) run(j *engine.Job, attempt int, run *Msg) {
	m := c.leader.RunMsg(j.Replica())
	if run != nil {
		m = *run
	}
	m.Seq, m.Attempt, m.Desc.Type, m.Args = j.Seq(), attempt, j.Type(), []byte(`{"n":1}`)
	c.leader.Send(m)
	c.flush()
}

// Durable jobs pack onto the first replica, by name, that has their
// type's handler and a free slot; none goes to a replica without it. A
// replica runs what it is sent and its end reaches the Keeper; its Hello
// lists what it runs; a Run that crosses a Hello is dropped, and the
// Keeper, told the Hello's runs, knows the attempt lost; a replica
// removed runs nothing the Keeper counts.
func TestClusterDurableRuns(t *testing.T) {
	c, k, runners := newDurableCluster(t, 1, map[string][]string{
		"0-none": nil, "a": {"mail"}, "b": {"mail", "pdf"},
	})
	assert.Equal(t, []string{"mail", "pdf"}, c.le.Replicas()[2].Types, "b's types, from its Hello")
	for name, runs := range k.runs {
		assert.Empty(t, runs, "replica %s runs nothing yet", name)
	}

	mail1 := c.enqueueDurable("mail")
	mail2 := c.enqueueDurable("mail")
	pdf := c.enqueueDurable("pdf")
	c.leader.Grant(c.tick())
	require.Equal(t, []*engine.Job{mail1, mail2}, k.granted, "two slots serve mail: a's and b's; pdf waits for b")
	assert.Equal(t, "a", mail1.Replica(), "packed on the first replica with a mail handler")
	assert.Equal(t, "b", mail2.Replica(), "a is full: the next with a mail handler")
	assert.True(t, pdf.Waiting())
	why := c.le.WhyWaiting(pdf)
	assert.Equal(t, engine.WhyReplicasFull, why.Why)

	c.run(mail1, 1, nil)
	require.Len(t, runners["a"].ran, 1)
	assert.Equal(t, Msg{Seq: mail1.Seq(), Attempt: 1, Desc: engine.Desc{Type: "mail"}, Args: []byte(`{"n":1}`)}, runners["a"].ran[0])
	assert.Empty(t, runners["0-none"].ran)

	// a's Hello, asked again, lists the attempt it runs.
	c.leader.Lost(c.tick())
	c.flush()
	require.Contains(t, k.runs["a"], int64(mail1.Seq()))
	assert.Equal(t, 1, k.runs["a"][int64(mail1.Seq())].Attempt)
	assert.Empty(t, k.runs["b"], "b was sent nothing yet")

	// A Run taken before b's next Hello crosses it: b drops it, and the
	// Keeper has heard that b runs nothing.
	stale := c.leader.RunMsg("b")
	c.nodes["b"].r.Lost(c.tick())
	c.flush()
	c.run(mail2, 1, &stale)
	assert.Empty(t, runners["b"].ran, "a Run of an older Hello ran")
	assert.Empty(t, k.runs["b"])

	// a's attempt ends; the Keeper hears it, and the replica is free.
	c.nodes["a"].r.DurableDone(int64(mail1.Seq()), 1, engine.Failed, "smtp 451", DonePermanent, c.tick())
	c.flush()
	require.Len(t, k.done, 1)
	assert.Equal(t, Msg{Kind: Done, Term: 1, Replica: "a", Seq: mail1.Seq(), Attempt: 1, Outcome: engine.Failed,
		Err: "smtp 451", Flags: DonePermanent}, k.done[0])
	assert.True(t, c.nodes["a"].r.Idle())
	c.leader.Finish(mail1, engine.Failed, c.tick())

	// b removed: the Keeper hears it runs nothing, and its slot counts
	// until the Keeper ends the attempt.
	c.leader.RemoveReplica("b", c.tick())
	assert.Nil(t, k.runs["b"])

	c.leader.Finish(mail2, engine.NotRun, c.tick())
	c.leader.Grant(c.now)
	assert.True(t, pdf.Waiting(), "no replica left with a pdf handler")
	why = c.le.WhyWaiting(pdf)
	assert.Equal(t, engine.WhyNoReplica, why.Why)
	require.NoError(t, c.le.Verify(c.now))
}

// A Hello is read whole before anything is granted on it: when the last
// Hello a new term waits for says a job runs, the term's first grants
// count it, and no limit is passed for a job another replica asked for.
func TestClusterHelloWholeBeforeGrants(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(1), 0, "b", "z")
	c.leader.Begin(1, map[string]int{"b": 1, "z": 1}, c.tick())
	c.flush()
	var asked, runs engine.Job
	c.submit("z", &runs, "k")
	c.flush()
	c.submit("b", &asked, "k")
	c.flush()
	require.True(t, runs.Running() && !asked.Running(), "one slot in the cluster: z's job runs, b's waits")

	// A new leader: b's Hello (asking) comes before z's (running), whose
	// Hello is the last the term waits for.
	c.le = engine.New(c.cfg, nil)
	c.lout = &Outbox{}
	c.leader = NewLeader("l", 0, c.le, c.lp, c.lout)
	c.leader.Begin(2, map[string]int{"b": 1, "z": 1}, c.tick())
	c.flush()
	assert.Equal(t, 1, c.le.Summary().Running, "the cluster's one slot: z's job, adopted, and no grant past it")
	assert.False(t, asked.Running())
}

// A Run of a job whose earlier attempt still runs on the replica is
// answered at once as lost (it is not dropped, which would leave the
// leader waiting for it), and a Run sent twice runs once.
func TestClusterDurableRunWhileEarlierRuns(t *testing.T) {
	c, k, runners := newDurableCluster(t, 2, map[string][]string{"a": {"mail"}})
	j := c.enqueueDurable("mail")
	c.leader.Grant(c.tick())
	run := c.leader.RunMsg("a")
	c.run(j, 1, &run)
	c.run(j, 1, &run) // sent twice
	require.Len(t, runners["a"].ran, 1, "a Run sent twice runs once")
	c.run(j, 2, nil)
	require.Len(t, runners["a"].ran, 1, "attempt 2 did not run beside attempt 1")
	require.Len(t, k.done, 1)
	assert.Equal(t, 2, k.done[0].Attempt)
	assert.Equal(t, engine.Failed, k.done[0].Outcome)
	assert.Equal(t, DoneLost, k.done[0].Flags)
}

// A replica keeps each Done until the leader has Recorded it, and its
// Hellos carry it again meanwhile: a Done lost as a connection broke
// reaches the Keeper with the Hello that repairs the loss, among the
// attempts the Hello lists (so that the Keeper does not count the attempt
// lost), never twice as a Done; once Recorded, no Hello carries it. A
// Done of an attempt the Hello's Runs supersede is not sent again.
func TestClusterDoneSentUntilRecorded(t *testing.T) {
	c, k, _ := newDurableCluster(t, 2, map[string][]string{"a": {"mail"}})
	a := c.nodes["a"]
	first, second := c.enqueueDurable("mail"), c.enqueueDurable("mail")
	c.leader.Grant(c.tick())
	c.run(first, 1, nil)
	c.run(second, 1, nil)

	a.r.DurableDone(int64(first.Seq()), 1, engine.Completed, "", 0, c.tick())
	require.Len(t, a.out.Take(), 1, "the Done, lost with the connection")
	c.leader.Lost(c.tick()) // the leader's connection came back: it asks again
	c.flush()
	assert.Empty(t, k.done, "a Hello's Done is heard with its Runs")
	require.Contains(t, k.runs["a"], int64(first.Seq()))
	assert.Equal(t, Msg{Kind: Done, Term: 1, Replica: "a", Seq: first.Seq(), Attempt: 1, Outcome: engine.Completed},
		k.runs["a"][int64(first.Seq())])
	assert.Equal(t, Runs, k.runs["a"][int64(second.Seq())].Kind, "the attempt still running")
	assert.Equal(t, 1, c.sent[Recorded])

	c.leader.Lost(c.tick())
	c.flush()
	assert.NotContains(t, k.runs["a"], int64(first.Seq()), "Recorded: not sent again")

	// A Done heard alone is Recorded too; one whose Recorded was lost
	// comes again, and the Keeper hears it twice (it takes an attempt's
	// end once).
	a.r.DurableDone(int64(second.Seq()), 1, engine.Failed, "smtp 451", 0, c.tick())
	c.leader.Receive(a.out.Take(), c.tick())
	require.Len(t, k.done, 1)
	lost := c.lout.Take()
	require.Len(t, lost, 1)
	assert.Equal(t, Msg{Kind: Recorded, Term: 1, Replica: "a", Seq: second.Seq(), Attempt: 1}, lost[0])
	a.r.Lost(c.tick())
	c.flush()
	assert.Equal(t, Done, k.runs["a"][int64(second.Seq())].Kind, "sent again: its Recorded was lost")
	a.r.Lost(c.tick())
	c.flush()
	assert.Empty(t, k.runs["a"])
	assert.True(t, a.r.Idle())

	// A later attempt of the job runs on a (the leader counted the one
	// before lost): the Done of that one, lost, is not sent again.
	c.run(second, 2, nil)
	a.r.DurableDone(int64(second.Seq()), 2, engine.Failed, "late", 0, c.tick())
	a.out.Take()
	c.run(second, 3, nil)
	dones := c.sent[Done]
	a.r.Lost(c.tick())
	c.flush()
	assert.Equal(t, Msg{Kind: Runs, Term: 1, Replica: "a", Seq: second.Seq(), Attempt: 3, Ran: 1000},
		k.runs["a"][int64(second.Seq())])
	assert.Equal(t, dones, c.sent[Done])
}
