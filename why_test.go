package fairsched

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Snapshot says what holds each waiting job, the first that applies in
// docs/design.md's order (Why a job waits), and Stats counts them by reason.
func TestWhyWaiting(t *testing.T) {
	tt := newTimeTest(t, Config{
		MaxConcurrency: 6,
		TierLimits:     map[Tier]int{Foreground: 1},
		Types: map[string]TypeConfig{
			"fg":     {Tier: Foreground},
			"capped": {MaxConcurrency: 1},
			"excl":   {ConflictGroup: "repo"},
		},
		Keys: map[string]KeyConfig{
			"limited": {Rate: RateLimit{PerSecond: 1}},
			"small":   {MaxConcurrency: 1},
		},
	})
	g := newGate()
	submit := func(j Job) Handle {
		t.Helper()
		h, err := tt.s.Submit(context.Background(), j, g.fn)
		require.NoError(t, err)
		return h
	}
	tt.s.PauseKey("paused")
	want := map[uint64]WaitReason{}
	var holder Handle
	for _, j := range []Job{{Key: "limited"}, {Type: "fg"}, {Type: "capped"}, {Key: "small"}, {Type: "excl", ID: "x"}} {
		h := submit(j) // each starts, and holds what its second one waits for
		<-g.entered
		if j.Type == "excl" {
			holder = h
		}
	}
	// With a slot free, the dispatcher finds this one blocked at once.
	conflicting := submit(Job{Type: "excl", ID: "x"})
	want[conflicting.Seq()] = WaitConflict
	submit(Job{}) // the last slot
	<-g.entered
	want[submit(Job{NotBefore: tt.at(time.Hour)}).Seq()] = WaitNotBefore
	want[submit(Job{Key: "paused"}).Seq()] = WaitPaused
	want[submit(Job{Key: "limited"}).Seq()] = WaitRate
	want[submit(Job{Type: "fg"}).Seq()] = WaitTierCap
	want[submit(Job{Type: "capped"}).Seq()] = WaitTypeCap
	want[submit(Job{Key: "small"}).Seq()] = WaitKeyCap
	want[submit(Job{}).Seq()] = WaitTurn

	counts := map[WaitReason]int{}
	for _, ji := range tt.s.Snapshot() {
		if ji.Running {
			assert.Equal(t, NotWaiting, ji.Waiting, "job %d runs", ji.Seq)
			continue
		}
		assert.Equal(t, want[ji.Seq], ji.Waiting, "job %d", ji.Seq)
		if ji.Waiting == WaitConflict {
			assert.Equal(t, holder.Seq(), ji.WaitingOn, "the conflict's holder")
		}
		counts[ji.Waiting]++
	}
	assert.Len(t, counts, len(want))
	assert.Equal(t, counts, tt.s.Stats().Waiting)

	// With every slot taken, the dispatcher has not looked at a job with
	// a held conflict yet: Snapshot names the conflict, Stats counts the
	// job as waiting its turn until the dispatcher reaches it.
	late := submit(Job{Type: "excl", ID: "x"})
	for _, ji := range tt.s.Snapshot() {
		if ji.Seq == late.Seq() {
			assert.Equal(t, WaitConflict, ji.Waiting)
		}
	}
	counts[WaitTurn]++
	assert.Equal(t, counts, tt.s.Stats().Waiting)
	tt.s.ResumeKey("paused")
	close(g.open)
	tt.set(time.Hour)
	require.NoError(t, tt.s.WaitIdle(context.Background()))
}

// The reasons are named as the Prometheus collector labels them.
func TestWaitReasonNames(t *testing.T) {
	var names []string
	for _, r := range WaitReasons() {
		names = append(names, r.String())
	}
	assert.Equal(t, []string{"not-before", "dependency", "paused", "rate", "tier-cap", "type-cap", "key-cap", "conflict", "resource", "turn", "no-handler", "replicas-full", "no-replica"}, names)
	assert.Equal(t, "not-waiting", NotWaiting.String())
	assert.Equal(t, "WaitReason(42)", WaitReason(42).String())
}
