package decide

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/internal/engine"
)

// sampleChanges are changes of every kind, with fields at their extremes.
func sampleChanges() []Change {
	return []Change{
		{Kind: SetMaxConcurrency, N: 1},
		{Kind: SetMaxConcurrency},
		{Kind: SetTierLimit, Tier: -3, N: math.MaxInt32},
		{Kind: SetTypeLimit, Name: "mail", N: 7},
		{Kind: SetKey, Name: "tenant-é\x00", Key: engine.Key{Weight: 2.5, MinSlots: 1, MaxConcurrency: 3, MaxPending: 1000,
			Rate: engine.Rate{Period: math.MaxInt64, Burst: 4}}},
		{Kind: SetKey, Name: "k", Key: engine.Key{Weight: math.Copysign(0, -1)}},
		{Kind: SetKeyWeight, Name: "k", Weight: 0.1},
		{Kind: SetKeyWeight, Name: "k", Weight: math.Inf(1)},
		{Kind: ResetKey, Name: "k"},
		{Kind: ResetKeys},
		{Kind: SetResource, Name: "gpu", N: math.MinInt32},
		{Kind: PauseKey, Name: strings.Repeat("x", 300)},
		{Kind: ResumeKey, Name: "k"},
		{Kind: PauseType, Name: ""},
		{Kind: ResumeType, Name: "mail"},
	}
}

func TestChangeRoundTrip(t *testing.T) {
	for _, c := range sampleChanges() {
		b, err := EncodeChange(c)
		require.NoError(t, err, "%+v", c)
		got, err := DecodeChange(b)
		require.NoError(t, err, "%+v", c)
		assert.True(t, reflect.DeepEqual(c, got), "round trip:\n got %+v\nwant %+v", got, c)
		assert.Equal(t, math.Signbit(c.Key.Weight), math.Signbit(got.Key.Weight), "a float's sign")
	}
	b, err := EncodeChange(Change{Kind: SetMaxConcurrency, N: 16})
	require.NoError(t, err)
	assert.Len(t, b, 4, "version, kind, mask, N")
}

// A change of a kind, a version or a field not known, or bytes that are
// not exactly one change, are refused, never misread.
func TestChangeDecodeRefuses(t *testing.T) {
	_, err := EncodeChange(Change{Kind: lastChangeKind + 1})
	assert.Error(t, err)
	_, err = EncodeChange(Change{})
	assert.Error(t, err)

	good, err := EncodeChange(Change{Kind: SetKey, Name: "k", Key: engine.Key{Weight: 2, MinSlots: 1}})
	require.NoError(t, err)
	for name, b := range map[string][]byte{
		"empty":           nil,
		"version 2":       append([]byte{2}, good[1:]...),
		"kind unknown":    append([]byte{good[0], byte(lastChangeKind + 1)}, good[2:]...),
		"kind 0":          append([]byte{good[0], 0}, good[2:]...),
		"unknown field":   {changeVersion, byte(PauseKey), 0x80, 0x08},
		"left over":       append(append([]byte{}, good...), 0),
		"name too long":   {changeVersion, byte(PauseKey), changeName, 5, 'a'},
		"float too short": {changeVersion, byte(SetKeyWeight), 0x80, 0x04, 1, 2, 3},
	} {
		_, err := DecodeChange(b)
		assert.Error(t, err, name)
	}
	for i := range len(good) {
		_, err := DecodeChange(good[:i])
		assert.Error(t, err, "truncated to %d bytes", i)
	}
}

// FuzzDecodeChange: decoding never panics, and what decodes encodes, and
// decodes again to the same change.
func FuzzDecodeChange(f *testing.F) {
	for _, c := range sampleChanges() {
		b, _ := EncodeChange(c)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeChange(b)
		if err != nil {
			return
		}
		again, err := EncodeChange(c)
		if err != nil {
			t.Fatalf("decoded %+v, which does not encode: %v", c, err)
		}
		back, err := DecodeChange(again)
		if err != nil || !reflect.DeepEqual(back, c) && !hasNaN(c) {
			t.Fatalf("decoded %+v, encoded again and decoded %+v, %v", c, back, err)
		}
	})
}

func hasNaN(c Change) bool { return math.IsNaN(c.Weight) || math.IsNaN(c.Key.Weight) }
