package decide

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/engine"
)

// The run-time changes of the configuration in a test cluster: a log of
// them kept as a database would (encoded), appended from the replicas'
// ChangeOutboxes, and applied by each party from the last it applied, as
// internal/cluster does.

type changeLog struct {
	bodies [][]byte
	at     map[string]int // how many each party applied, by name ("l": the leader)
}

// publish appends what each of rs applied, one replica after another.
func (g *changeLog) publish(t *testing.T, rs ...*Remote) {
	t.Helper()
	for _, r := range rs {
		for _, c := range r.Changes().Take() {
			b, err := EncodeChange(c)
			require.NoError(t, err)
			g.bodies = append(g.bodies, b)
		}
	}
}

// apply applies the log to every party of c that has not applied it, and
// carries the messages that follows.
func (g *changeLog) apply(t *testing.T, c *testCluster) {
	t.Helper()
	if g.at == nil {
		g.at = map[string]int{}
	}
	each := func(name string, apply func(Change, int64) bool) {
		for ; g.at[name] < len(g.bodies); g.at[name]++ {
			ch, err := DecodeChange(g.bodies[g.at[name]])
			require.NoError(t, err)
			assert.True(t, apply(ch, c.tick()), "%s refused %+v", name, ch)
		}
	}
	each("l", c.leader.Apply)
	for name, n := range c.nodes {
		each(name, n.r.Apply)
	}
	c.flush()
}

// A change made on one replica reaches the leader and every replica
// through the log, in the log's order even where two replicas' changes
// cross; a change refused is not published; a new leader that applies
// the log before its term begins decides by it.
func TestClusterChangesReachEveryone(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(3), 3, "a", "b")
	c.leader.Begin(1, map[string]int{"a": 3, "b": 3}, c.tick())
	c.flush()
	a, b := c.nodes["a"], c.nodes["b"]
	var log changeLog

	require.True(t, a.r.Configure(Change{Kind: SetMaxConcurrency, N: 1}, c.tick()))
	assert.Equal(t, 1, a.e.MaxConcurrency(), "applied on the replica that made it")
	assert.Equal(t, 3, c.le.MaxConcurrency(), "not yet at the leader")
	log.publish(t, a.r, b.r)
	require.Len(t, log.bodies, 1)
	log.apply(t, c)
	for name, e := range map[string]*engine.Engine{"l": c.le, "a": a.e, "b": b.e} {
		assert.Equal(t, 1, e.MaxConcurrency(), "%s's engine", name)
	}
	var bj [4]engine.Job
	for i := range bj {
		c.submit("b", &bj[i], "k")
	}
	c.flush()
	assert.Equal(t, 1, c.le.Summary().Running, "the cluster runs 1 at once")

	assert.False(t, a.r.Configure(Change{Kind: SetTypeLimit, Name: "no such type", N: 1}, c.tick()))
	assert.Empty(t, a.r.Changes().Take(), "a change refused goes nowhere")

	// Two replicas change one limit at once; b's reaches the log first.
	// Each applied its own, so they disagree until both apply the log.
	require.True(t, a.r.Configure(Change{Kind: SetMaxConcurrency, N: 2}, c.tick()))
	require.True(t, b.r.Configure(Change{Kind: SetMaxConcurrency, N: 3}, c.tick()))
	log.publish(t, b.r, a.r)
	log.apply(t, c)
	for name, e := range map[string]*engine.Engine{"l": c.le, "a": a.e, "b": b.e} {
		assert.Equal(t, 2, e.MaxConcurrency(), "%s's engine: a's change, the log's last", name)
	}
	assert.Equal(t, 3, c.le.Summary().Running,
		"b's change, the log's first, let two more start as the leader applied it; a's lowered the limit, and they run on")

	// The leader dies. The next one makes its engine as configured at New
	// (3 slots), applies the whole log, and then begins its term.
	c.le = engine.New(c.cfg, nil)
	c.lp, c.lout = &party{}, &Outbox{}
	c.leader = NewLeader("l", 3, c.le, c.lp, c.lout)
	delete(log.at, "l")
	log.apply(t, c)
	assert.Equal(t, 2, c.le.MaxConcurrency(), "the new leader's engine has every change")
	c.leader.Begin(2, map[string]int{"a": 3, "b": 3}, c.tick())
	c.flush()
	assert.Equal(t, 3, c.le.Summary().Running, "b's three running jobs, adopted")
	var aj engine.Job
	c.submit("a", &aj, "k")
	c.flush()
	assert.False(t, a.p.has(&aj), "3 run, above the limit of 2: none starts")
	var done []*engine.Job
	for i := range bj {
		if bj[i].Running() {
			done = append(done, &bj[i])
		}
	}
	require.Len(t, done, 3)
	b.r.Finish(done[0], engine.Completed, c.tick())
	c.flush()
	assert.Equal(t, 2, c.le.Summary().Running, "2 run: still none starts")
	b.r.Finish(done[1], engine.Completed, c.tick())
	c.flush()
	assert.Equal(t, 2, c.le.Summary().Running, "1 ran, and one more started: 2 at once")
}

// A key paused on one replica holds its jobs submitted on another, at
// the leader; resumed on a third party, they start.
func TestClusterPauseFromReplica(t *testing.T) {
	c := newTestCluster(t, testEngineConfig(4), 4, "a", "b")
	c.leader.Begin(1, map[string]int{"a": 4, "b": 4}, c.tick())
	c.flush()
	a, b := c.nodes["a"], c.nodes["b"]
	var log changeLog
	require.True(t, a.r.Configure(Change{Kind: PauseKey, Name: "p"}, c.tick()))
	log.publish(t, a.r)
	log.apply(t, c)
	assert.Equal(t, []string{"p"}, c.le.PausedKeys())
	assert.Equal(t, []string{"p"}, b.e.PausedKeys())

	var p, q engine.Job
	c.submit("b", &p, "p")
	c.submit("b", &q, "q")
	c.flush()
	assert.True(t, b.p.has(&q), "another key's job runs")
	assert.False(t, b.p.has(&p), "the paused key's job waits")

	require.True(t, b.r.Configure(Change{Kind: ResumeKey, Name: "p"}, c.tick()))
	log.publish(t, b.r)
	log.apply(t, c)
	assert.True(t, b.p.has(&p), "resumed: the leader granted it as it applied the change")
	assert.Empty(t, a.e.PausedKeys())
}
