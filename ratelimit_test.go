package fairsched

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A rate limit (docs/design.md, Rate limits): a key limited to 5 starts a second, with slots
// to spare, runs exactly 5 a second, and the slots it does not use are not
// wasted: a backlogged key without a limit takes every one of them. Jobs
// of 1 s end on the second, so the limited key's tokens wait for slots,
// up to its burst of 5.
func TestRateLimitedKeyLeavesItsSlotsToOthers(t *testing.T) {
	const slots = 10
	m := newSim(t, Config{
		MaxConcurrency: slots,
		Types:          map[string]TypeConfig{"call": {DefaultCost: time.Second}},
		// Without its rate, the limited key's weight would give it 7.5 slots.
		Keys: map[string]KeyConfig{"limited": {Weight: 3, Rate: RateLimit{PerSecond: 5, Burst: 5}}},
	})
	f := fairFeed(m, func(string, int) (Job, time.Duration) { return Job{Type: "call"}, time.Second })
	f.start("limited", 0, slots)
	f.start("other", 0, slots)
	const from, to = 2 * time.Second, 62 * time.Second
	m.run(to)

	perSecond := map[time.Duration]int{}
	for _, sj := range m.order {
		if sj.Job.Key == "limited" && sj.Start >= from && sj.Start < to {
			perSecond[sj.Start.Truncate(time.Second)]++
		}
	}
	for s := from; s < to; s += time.Second {
		require.Equal(t, 5, perSecond[s], "the limited key's starts in the second from %v", s)
	}
	shares := fairShares(m, slots, []string{"limited", "other"}, from, to)
	assert.InDelta(t, 0.5, shares["limited"], 1e-9, "5 jobs of 1 s a second hold 5 of 10 slots")
	assert.InDelta(t, 0.5, shares["other"], 1e-9, "the other key holds every slot left")
}

// A type out of tokens starts its next job when the token is due, through
// the scheduler's timer, with no submit or finish to prompt it; the burst
// starts at once. Other types are not held up meanwhile.
func TestRateLimitedTypeStartsOnItsToken(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 8, Types: map[string]TypeConfig{
		"mail": {Rate: RateLimit{PerSecond: 2, Burst: 2}},
	}})
	g := newGate()
	var hs []Handle
	for range 5 {
		h, err := tt.s.Submit(context.Background(), Job{Type: "mail"}, g.fn)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	<-g.entered
	<-g.entered // the burst
	other, err := tt.s.Submit(context.Background(), Job{}, g.fn)
	require.NoError(t, err)
	<-g.entered // another type starts at once
	require.Equal(t, 3, tt.s.Stats().Running)

	for i, at := range []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond} {
		tt.set(at - time.Microsecond)
		require.Equal(t, 3+i, tt.s.Stats().Running, "before the token due at %v", at)
		tt.set(at)
		<-g.entered
		require.Equal(t, 4+i, tt.s.Stats().Running, "at the token due at %v", at)
	}
	close(g.open)
	for _, h := range append(hs, other) {
		require.NoError(t, h.Wait(context.Background()))
	}
}

// A key's rate changes with SetKey; bad rates are refused with errors that
// say which field and why.
func TestRateLimitConfig(t *testing.T) {
	for _, tc := range []struct {
		rate RateLimit
		want string
	}{
		{RateLimit{PerSecond: -1}, "Rate.PerSecond is -1"},
		{RateLimit{PerSecond: math.NaN()}, "Rate.PerSecond is NaN"},
		{RateLimit{PerSecond: math.Inf(1)}, "Rate.PerSecond is +Inf"},
		{RateLimit{PerSecond: 1, Burst: -2}, "Rate.Burst is -2"},
		{RateLimit{Burst: 3}, "a bucket that never refills"},
	} {
		_, err := New(Config{Keys: map[string]KeyConfig{"k": {Rate: tc.rate}}})
		require.ErrorContains(t, err, tc.want)
		_, err = New(Config{Types: map[string]TypeConfig{"t": {Rate: tc.rate}}})
		require.ErrorContains(t, err, tc.want)
		_, err = New(Config{DefaultKey: KeyConfig{Rate: tc.rate}})
		require.ErrorContains(t, err, tc.want)
	}

	tt := newTimeTest(t, Config{MaxConcurrency: 4})
	require.ErrorContains(t, tt.s.SetKey("k", KeyConfig{Rate: RateLimit{PerSecond: -5}}), "Rate.PerSecond is -5")
	require.NoError(t, tt.s.SetKey("k", KeyConfig{Rate: RateLimit{PerSecond: 1}}))
	g := newGate()
	for range 2 {
		_, err := tt.s.Submit(context.Background(), Job{Key: "k"}, g.fn)
		require.NoError(t, err)
	}
	<-g.entered
	require.Equal(t, 1, tt.s.Stats().Running, "one token")
	require.NoError(t, tt.s.SetKey("k", KeyConfig{}))
	<-g.entered // no limit any more: the second starts at once
	require.Equal(t, 2, tt.s.Stats().Running)
	close(g.open)
	require.NoError(t, tt.s.WaitIdle(context.Background()))
}
