package fairsched

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Queue lists the running jobs by Seq, then the waiting ones in the order
// the dispatcher ranks them: a key below its reservation, then by tier,
// then by key virtual time, then priority; then the paused jobs. It
// leaves out the delayed jobs, counting them, and pages through the rest.
func TestQueuePage(t *testing.T) {
	tt := newTimeTest(t, Config{
		MaxConcurrency: 2,
		Types:          map[string]TypeConfig{"fg": {Tier: Foreground}},
		Keys:           map[string]KeyConfig{"vip": {MinSlots: 1}},
	})
	g := newGate()
	t.Cleanup(func() { close(g.open) })
	submit := func(j Job) uint64 {
		t.Helper()
		h, err := tt.s.Submit(context.Background(), j, g.fn)
		require.NoError(t, err)
		return h.Seq()
	}
	a1, a2 := submit(Job{Key: "a"}), submit(Job{Key: "a"}) // running: a's virtual time is above b's
	<-g.entered
	<-g.entered
	b20 := submit(Job{Key: "b", Priority: 20})
	b80 := submit(Job{Key: "b", Priority: 80})
	fg := submit(Job{Type: "fg", Key: "c"})
	vip := submit(Job{Key: "vip"})
	a3 := submit(Job{Key: "a"})
	submit(Job{NotBefore: tt.at(time.Hour)})
	tt.s.PauseKey("p")
	paused := submit(Job{Key: "p"})

	p := tt.s.Queue(0, 100)
	assert.Equal(t, 2, p.Running)
	assert.Equal(t, 5, p.Waiting)
	assert.Equal(t, 1, p.Paused)
	assert.Equal(t, 1, p.Aside, "the delayed job")
	want := []uint64{a1, a2, vip, fg, b80, b20, a3, paused}
	assert.Equal(t, want, seqsOf(p.Jobs))
	for i, ji := range p.Jobs {
		assert.Equal(t, i < 2, ji.Running, "job %d", ji.Seq)
		switch {
		case ji.Seq == paused:
			assert.Equal(t, WaitPaused, ji.Waiting)
		case !ji.Running:
			assert.Equal(t, WaitTurn, ji.Waiting, "job %d", ji.Seq)
		}
	}
	assert.Equal(t, 80, p.Jobs[4].BasePriority)

	for _, page := range []struct {
		offset, limit int
		want          []uint64
	}{
		{1, 3, want[1:4]}, {2, 2, want[2:4]}, {6, 10, want[6:]}, {6, 1, want[6:7]}, {7, 10, want[7:]}, {8, 10, nil},
		{-5, 2, want[:2]}, {0, 0, nil}, {3, -1, nil}, {1, math.MaxInt, want[1:]}, {7, math.MaxInt, want[7:]}, {math.MaxInt, 1, nil},
	} {
		got := tt.s.Queue(page.offset, page.limit)
		assert.Equal(t, page.want, seqsOf(got.Jobs), "Queue(%d, %d)", page.offset, page.limit)
		assert.Equal(t, 5, got.Waiting)
	}
}

func seqsOf(jobs []JobInfo) []uint64 {
	var out []uint64
	for _, ji := range jobs {
		out = append(out, ji.Seq)
	}
	return out
}
