package decide

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/engine"
)

// grants records what a Decider hands over.
type grants []*engine.Job

func (g *grants) Granted(j *engine.Job) { *g = append(*g, j) }

func (g *grants) Ended(j *engine.Job, o engine.Outcome, r *engine.Refusal, now int64) {
	panic("decide: the engine's own decisions end nothing through the Grantee")
}

func newLocal(t *testing.T, slots int) (*Local, *grants) {
	t.Helper()
	g := &grants{}
	e := engine.New(engine.Config{MaxConcurrency: slots, CostAlpha: 0.3, DefaultCost: 1, IdleTTL: 600e6}, nil)
	return NewLocal(e, g), g
}

// Local says a job starts now when the engine started it as it admitted
// it, and grants every other through the Grantee, in the engine's order,
// as slots free.
func TestLocalGrants(t *testing.T) {
	l, g := newLocal(t, 1)
	var jobs [3]engine.Job
	startsNow, r := l.Enqueue(&jobs[0], engine.Desc{Key: "a"}, nil, 1)
	require.Nil(t, r)
	assert.True(t, startsNow, "a free slot: it starts with the answer")
	for i := 1; i < 3; i++ {
		startsNow, r = l.Enqueue(&jobs[i], engine.Desc{Key: "b"}, nil, int64(1+i))
		require.Nil(t, r)
		assert.False(t, startsNow, "no slot: it waits for a grant")
	}
	l.Grant(4)
	assert.Empty(t, *g, "nothing granted while the slot is held")

	l.Finish(&jobs[0], engine.Completed, 5)
	l.Grant(5)
	require.Len(t, *g, 1)
	assert.Same(t, &jobs[1], (*g)[0], "the first waiting job, in the order")

	assert.False(t, l.Cancel(&jobs[2], 6), "cancelling a queued job frees no slot")
	l.Finish(&jobs[1], engine.Completed, 7)
	l.Grant(7)
	assert.Len(t, *g, 1, "a cancelled job is never granted")
	require.NoError(t, l.e.Verify(7))
}

// Configure applies a change, and refuses one the engine refuses,
// changing nothing.
func TestLocalConfigure(t *testing.T) {
	l, g := newLocal(t, 1)
	var jobs [2]engine.Job
	for i := range jobs {
		_, r := l.Enqueue(&jobs[i], engine.Desc{}, nil, 1)
		require.Nil(t, r)
	}
	require.True(t, l.Configure(Change{Kind: SetMaxConcurrency, N: 2}, 2))
	l.Grant(2)
	assert.Len(t, *g, 1, "the second slot grants the waiting job")
	assert.False(t, l.Configure(Change{Kind: SetTypeLimit, Name: "nope", N: 1}, 3), "an unknown type")
	assert.False(t, l.Configure(Change{Kind: PauseType, Name: "nope"}, 3), "an unknown type")
	assert.False(t, l.Configure(Change{Kind: SetResource, Name: "nope", N: 1}, 3), "an unknown resource")
	assert.Equal(t, 2, l.Figures(0, nil).MaxConcurrency)
	require.NoError(t, l.e.Verify(3))
}

// A listing copies the facts of the jobs it shows: a page runs through
// the running jobs, then the waiting ones in the order they would start,
// then the paused; a snapshot holds every one.
func TestLocalListing(t *testing.T) {
	l, _ := newLocal(t, 1)
	var jobs [4]engine.Job
	descs := []engine.Desc{{Key: "a", ID: "run"}, {Key: "b", ID: "b1"}, {Key: "c", ID: "c1"}, {Key: "p", ID: "held"}}
	for i := range jobs {
		_, r := l.Enqueue(&jobs[i], descs[i], nil, int64(10+i))
		require.Nil(t, r)
	}
	l.Configure(Change{Kind: PauseKey, Name: "p"}, 20)

	var li Listing
	l.Page(&li, 0, 10, 30)
	assert.Equal(t, 1, li.Summary.Running)
	assert.Equal(t, 2, li.Summary.Pending)
	assert.Equal(t, 1, li.Summary.Paused)
	require.Len(t, li.Running, 1)
	run := li.Running[0]
	assert.Equal(t, "run", run.ID)
	assert.True(t, run.Running)
	assert.Equal(t, int64(10), run.At, "a running job's wait ended at its start")
	ids := func(fs []JobFacts) (out []string) {
		for _, f := range fs {
			out = append(out, f.ID)
		}
		return out
	}
	assert.Equal(t, []string{"b1", "c1", "held"}, ids(li.Jobs), "the waiting jobs in order, then the paused")
	held := li.Jobs[2]
	assert.Equal(t, engine.WhyPaused, held.Why)
	assert.True(t, held.KeyPaused, "held by its key's pause")
	assert.Equal(t, int64(30), held.At, "a waiting job's wait runs to the listing's instant")
	assert.Equal(t, int64(13), held.Submitted)

	l.Page(&li, 2, 1, 30)
	assert.Empty(t, li.Running, "the page starts past the running jobs")
	assert.Equal(t, []string{"c1"}, ids(li.Jobs), "offset 2 is the second waiting job")

	l.Snapshot(&li, 31)
	assert.Len(t, li.Running, 1)
	assert.ElementsMatch(t, []string{"b1", "c1", "held"}, ids(li.Jobs))
	require.NoError(t, l.e.Verify(31))
}
