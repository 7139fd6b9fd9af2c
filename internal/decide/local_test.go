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
