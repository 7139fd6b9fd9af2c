package fairsched

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The disable policy (docs/design.md, Disable policy): 5 failures of one (type, ID) within an hour
// disable the pair for an hour; it is re-enabled by hand earlier. Other
// pairs are not touched, nor are the pair's jobs already queued.
func TestDisablePolicySeed003(t *testing.T) {
	events := make(chan Event, 8)
	tt := newTimeTest(t, Config{MaxConcurrency: 1, Types: map[string]TypeConfig{
		"index": {Disable: DisablePolicy{Failures: 5, Window: time.Hour, For: time.Hour}},
	}, OnEvent: func(ev Event) {
		if ev.Kind == EventDisabled {
			events <- ev
		}
	}})
	fail := func(context.Context) error { return errFlaky }
	repo := Job{Type: "index", ID: "repo-1"}
	for i := range 5 { // failures at 0, 10, 20, 30, 40 minutes
		tt.set(time.Duration(i) * 10 * time.Minute)
		require.ErrorIs(t, tt.s.RunSync(context.Background(), repo, fail), errFlaky)
		if i < 4 {
			require.NoError(t, tt.s.RunSync(context.Background(), repo, noop), "not yet disabled after %d", i+1)
			assert.Empty(t, tt.s.Disabled())
		}
	}
	err := tt.s.RunSync(context.Background(), repo, noop)
	require.ErrorIs(t, err, ErrDisabled)
	assert.Contains(t, err.Error(), `job type "index", ID "repo-1", since 2026-01-01T00:40:00Z, until 2026-01-01T01:40:00Z`)
	_, err = tt.s.Submit(context.Background(), repo, noop)
	require.ErrorIs(t, err, ErrDisabled)
	require.NoError(t, tt.s.RunSync(context.Background(), Job{Type: "index", ID: "repo-2"}, noop), "another pair")
	assert.Equal(t, []DisabledPair{{Type: "index", ID: "repo-1", Since: tt.at(40 * time.Minute), Until: tt.at(100 * time.Minute)}}, tt.s.Disabled())
	st := tt.s.Stats()
	assert.Equal(t, 1, st.Disabled)
	assert.EqualValues(t, 1, st.DisabledTotal)
	assert.EqualValues(t, 2, st.DisabledRefusals)

	tt.set(time.Hour)
	tt.s.Enable("index", "repo-1")
	require.NoError(t, tt.s.RunSync(context.Background(), repo, noop), "re-enabled by hand before its hour")
	assert.Empty(t, tt.s.Disabled())
	require.NoError(t, tt.s.Close())
	ev := <-events
	assert.Equal(t, "repo-1", ev.ID)
	assert.Equal(t, tt.at(40*time.Minute), ev.Time)
}

// Failures count only within the window; a disable with a For ends by
// itself; one without lasts until Enable.
func TestDisablePolicyWindowAndTime(t *testing.T) {
	tt := newTimeTest(t, Config{Types: map[string]TypeConfig{
		"a": {Disable: DisablePolicy{Failures: 2, Window: time.Minute, For: time.Minute}},
		"b": {Disable: DisablePolicy{Failures: 1, Window: time.Minute}},
	}})
	fail := func(context.Context) error { return errFlaky }
	a := Job{Type: "a"}
	require.Error(t, tt.s.RunSync(context.Background(), a, fail))
	tt.set(time.Minute) // the first failure is out of the window: (0, 60 s]
	require.Error(t, tt.s.RunSync(context.Background(), a, fail))
	require.NoError(t, tt.s.RunSync(context.Background(), a, noop), "one failure in the window")
	tt.set(90 * time.Second)
	require.Error(t, tt.s.RunSync(context.Background(), a, fail))
	require.ErrorIs(t, tt.s.RunSync(context.Background(), a, noop), ErrDisabled)
	tt.set(150 * time.Second)
	require.NoError(t, tt.s.RunSync(context.Background(), a, noop), "its minute is up")

	b := Job{Type: "b", ID: "x"}
	require.Error(t, tt.s.RunSync(context.Background(), b, fail))
	tt.set(time.Hour)
	require.ErrorIs(t, tt.s.RunSync(context.Background(), b, noop), ErrDisabled, "until Enable")
	assert.True(t, tt.s.Disabled()[0].Until.IsZero())

	// A For of less than a µs, the scheduler's grain, disables for none,
	// not until Enable.
	require.NoError(t, tt.s.RegisterType("c", TypeConfig{Disable: DisablePolicy{Failures: 1, Window: time.Minute, For: 500 * time.Nanosecond}}))
	c := Job{Type: "c", ID: "y"}
	require.Error(t, tt.s.RunSync(context.Background(), c, fail))
	require.NoError(t, tt.s.RunSync(context.Background(), c, noop), "disabled for none")
	assert.EqualValues(t, 3, tt.s.Stats().DisabledTotal, "it counts as disabled")
}

// A pair's jobs already queued are not touched when it is disabled.
func TestDisableLeavesQueuedJobs(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 1, Types: map[string]TypeConfig{
		"a": {Disable: DisablePolicy{Failures: 1, Window: time.Minute}},
	}})
	g := newGate()
	first, err := tt.s.Submit(context.Background(), Job{Type: "a"}, func(ctx context.Context) error {
		<-g.open
		return errFlaky
	})
	require.NoError(t, err)
	queued, err := tt.s.Submit(context.Background(), Job{Type: "a"}, noop)
	require.NoError(t, err)
	close(g.open)
	require.Error(t, first.Wait(context.Background()))
	require.NoError(t, queued.Wait(context.Background()), "queued before the pair was disabled: it runs")
	_, err = tt.s.Submit(context.Background(), Job{Type: "a"}, noop)
	require.ErrorIs(t, err, ErrDisabled)
}

func TestDisablePolicyValidation(t *testing.T) {
	for _, tc := range []struct {
		p    DisablePolicy
		want string
	}{
		{DisablePolicy{Failures: -1}, "Disable.Failures is -1"},
		{DisablePolicy{Failures: 3}, "Disable.Window is 0s; with Failures set it must be positive"},
		{DisablePolicy{For: -time.Second}, "Disable.For is -1s"},
	} {
		_, err := New(Config{Types: map[string]TypeConfig{"x": {Disable: tc.p}}})
		require.ErrorContains(t, err, tc.want)
	}
}

// A disabled (type, ID) pair is refused even where a duplicate policy
// would have joined the submission to a job of that pair already waiting:
// joining it would be a new submission of the pair all the same.
func TestDisabledPairJoinsNothing(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 1, Types: map[string]TypeConfig{
		"a": {Disable: DisablePolicy{Failures: 1, Window: time.Minute}, Duplicates: JoinQueued},
	}})
	ctx := context.Background()
	g := newGate()
	first, err := tt.s.Submit(ctx, Job{Type: "a", ID: "x"}, func(ctx context.Context) error {
		<-g.open
		return errFlaky
	})
	require.NoError(t, err)
	waiting, err := tt.s.Submit(ctx, Job{Type: "a", ID: "x", NotBefore: tt.clk.Now().Add(time.Hour)}, noop)
	require.NoError(t, err)
	close(g.open)
	require.Error(t, first.Wait(ctx))
	_, err = tt.s.Submit(ctx, Job{Type: "a", ID: "x"}, noop)
	require.ErrorIs(t, err, ErrDisabled, "not joined to the waiting job")
	require.ErrorIs(t, tt.s.RunSync(ctx, Job{Type: "a", ID: "x"}, noop), ErrDisabled)
	require.ErrorIs(t, tt.s.TryRunSync(ctx, Job{Type: "a", ID: "x"}, noop), ErrDisabled, "refused, not would-wait")
	assert.Equal(t, uint64(2), tt.s.Stats().Submitted, "the refused ones were not submitted")
	assert.Equal(t, 1, tt.s.Stats().Queued, "the waiting job is untouched")
	waiting.Cancel()
}

// Disable by hand does what the policy does when it disables a pair: it
// forgets the pair's recent failures (so one failure after the pair's
// time is up does not disable it again at once), counts in DisabledTotal
// and sends an EventDisabled, with no job. A negative time is refused, as
// a negative DisablePolicy.For is.
func TestDisableByHandAsThePolicy(t *testing.T) {
	events := make(chan Event, 8)
	tt := newTimeTest(t, Config{MaxConcurrency: 1, Types: map[string]TypeConfig{
		"index": {Tier: Foreground, Disable: DisablePolicy{Failures: 2, Window: time.Hour, For: time.Hour}},
	}, OnEvent: func(ev Event) {
		if ev.Kind == EventDisabled {
			events <- ev
		}
	}})
	fail := func(context.Context) error { return errFlaky }
	repo := Job{Type: "index", ID: "repo-1"}

	require.Error(t, tt.s.Disable("index", "repo-1", -time.Minute), "a negative time")
	assert.Empty(t, tt.s.Disabled())

	require.ErrorIs(t, tt.s.RunSync(context.Background(), repo, fail), errFlaky, "one failure of two")
	require.NoError(t, tt.s.Disable("index", "repo-1", time.Minute))
	tt.set(time.Minute)
	require.ErrorIs(t, tt.s.RunSync(context.Background(), repo, fail), errFlaky, "after its minute: one failure since")
	assert.Empty(t, tt.s.Disabled(), "the failure before the disable was forgotten")
	assert.EqualValues(t, 1, tt.s.Stats().DisabledTotal)

	require.NoError(t, tt.s.Close()) // the hook has been given every event
	require.Len(t, events, 1, "one pair disabled, once")
	assert.Equal(t, Event{Kind: EventDisabled, Time: tt.at(0), Type: "index", ID: "repo-1", Tier: Foreground}, <-events)
}

// Pairs disabled for a time and never submitted again are swept: under a
// stream of distinct IDs, each disabled for a minute (by the policy or by
// hand) and never seen again, the table stays bounded by the pairs
// disabled now, not by every pair ever disabled.
func TestDisabledPairsSwept(t *testing.T) {
	tt := newTimeTest(t, Config{MaxConcurrency: 1, Types: map[string]TypeConfig{
		"index": {Disable: DisablePolicy{Failures: 1, Window: time.Hour, For: time.Minute}},
	}})
	fail := func(context.Context) error { return errFlaky }
	most := 0
	for i := range 2000 {
		tt.set(time.Duration(i) * 30 * time.Second) // each pair's minute is up two pairs later
		id := "repo-" + strconv.Itoa(i)
		if i%2 == 0 {
			require.ErrorIs(t, tt.s.RunSync(context.Background(), Job{Type: "index", ID: id}, fail), errFlaky)
		} else {
			require.NoError(t, tt.s.Disable("index", id, time.Minute))
		}
		most = max(most, tt.s.rt.DisabledPairsKept())
	}
	assert.LessOrEqual(t, most, 128, "pairs kept at most, for at most 2 disabled at a time")
	st := tt.s.Stats()
	assert.Equal(t, 2, st.Disabled)
	assert.EqualValues(t, 2000, st.DisabledTotal)
	assert.Len(t, tt.s.Disabled(), 2)
}

// DisabledSoonest lists the n pairs whose time is up soonest, those until
// Enable last, and counts them all: the first n of every pair disabled
// now in that order, the expired left out.
func TestDisabledSoonest(t *testing.T) {
	tt := newTimeTest(t, Config{Types: map[string]TypeConfig{"a": {}, "b": {}}})
	for i := range 60 {
		typ := []string{"a", "b"}[i%2]
		d := time.Duration(1+(i*7)%13) * time.Minute // ties among them
		if i%5 == 0 {
			d = 0 // until Enable
		}
		require.NoError(t, tt.s.Disable(typ, "id-"+strconv.Itoa(i), d))
	}
	tt.set(2 * time.Minute) // those of a minute or two are up
	all := tt.s.Disabled()
	slices.SortFunc(all, func(a, b DisabledPair) int {
		if !a.Until.Equal(b.Until) {
			switch {
			case a.Until.IsZero():
				return 1
			case b.Until.IsZero():
				return -1
			}
			return a.Until.Compare(b.Until)
		}
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.ID, b.ID))
	})
	require.Less(t, len(all), 60, "some are up")
	for _, n := range []int{-1, 0, 1, 7, len(all), 100} {
		got, total := tt.s.DisabledSoonest(n)
		assert.Equal(t, len(all), total, "n %d", n)
		want := all[:min(max(n, 0), len(all))]
		if len(want) == 0 {
			want = nil
		}
		assert.Equal(t, want, got, "n %d", n)
	}
}
