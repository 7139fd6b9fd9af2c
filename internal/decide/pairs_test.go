package decide

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Failures disable a pair once Failures fall within Window; older ones
// are not counted; the pair's time runs out at For, and Lookup forgets it.
func TestPairsFailed(t *testing.T) {
	var p Pairs
	k := Pair{"sync", "repo-1"}
	r := DisableRule{Failures: 3, Window: 100, For: 50}
	for _, at := range []int64{0, 10, 150} { // the first two are out of the window by 150
		_, disabled := p.Failed(k, r, at)
		require.False(t, disabled)
	}
	assert.False(t, p.Any())
	_, disabled := p.Failed(k, r, 160)
	require.False(t, disabled, "two failures within the window")
	span, disabled := p.Failed(k, r, 170)
	require.True(t, disabled, "the third within the window")
	assert.Equal(t, Span{Since: 170, Until: 220}, span)
	assert.Equal(t, uint64(1), p.Total)
	assert.Equal(t, 1, p.Count(219))

	got, ok := p.Lookup(k, 219)
	assert.True(t, ok)
	assert.Equal(t, span, got)
	_, ok = p.Lookup(k, 220)
	assert.False(t, ok, "its time is up")
	failing, kept := p.Tracked()
	assert.Zero(t, failing, "disabling forgot its failures")
	assert.Zero(t, kept, "Lookup forgot the pair whose time was up")

	_, disabled = p.Failed(Pair{"sync", "other"}, DisableRule{}, 300)
	assert.False(t, disabled, "a type without a rule disables nothing")

	// For under one µs: disabled for none, not until enabled.
	short := Pair{"sync", "short"}
	span, disabled = p.Failed(short, DisableRule{Failures: 1, Window: 100, For: 0}, 400)
	require.True(t, disabled)
	assert.Equal(t, Span{Since: 400, Until: 400}, span)
	_, ok = p.Lookup(short, 400)
	assert.False(t, ok, "its time was up as it began")
	assert.Equal(t, uint64(2), p.Total)
}

// Disable holds a pair until Enable when its span has no end; Enable
// forgets its recent failures too.
func TestPairsDisableEnable(t *testing.T) {
	var p Pairs
	k := Pair{"t", "x"}
	r := DisableRule{Failures: 2, Window: 1000, Forever: true}
	p.Failed(k, r, 1)
	p.Disable(k, Span{Since: 5}, 5)
	_, ok := p.Lookup(k, 1<<40)
	assert.True(t, ok, "until enabled")
	p.Enable(k)
	assert.False(t, p.Any())
	_, disabled := p.Failed(k, r, 10)
	assert.False(t, disabled, "the failure before Disable was forgotten")
}

// However many distinct pairs fail once and are never seen again, or are
// disabled for a time that runs out, each table stays within twice what
// is live (at least 64 entries).
func TestPairsBounded(t *testing.T) {
	var p Pairs
	r := DisableRule{Failures: 2, Window: 10}
	for i := range 10_000 {
		now := int64(i * 100) // each failure is out of the others' windows
		p.Failed(Pair{"t", fmt.Sprint(i)}, r, now)
		p.Disable(Pair{"d", fmt.Sprint(i)}, Span{Since: now, Until: now + 1}, now)
	}
	failing, kept := p.Tracked()
	assert.LessOrEqual(t, failing, 128)
	assert.LessOrEqual(t, kept, 128)
	assert.Equal(t, uint64(10_000), p.Total)
}
