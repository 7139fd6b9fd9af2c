package rt

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fairsched/fairsched/internal/clock"
)

// TestEngineTimeWallOnly: with a clock whose readings carry no monotonic
// reading, engineTime takes the span from the epoch by the wall clock's
// seconds and nanoseconds; it must give what time.Time.Sub gives, for
// times on either side of the epoch, off a whole µs or on one, and as
// far as Sub's limits and beyond, where both are kept within the
// engine's, up to the ends of time.Time.
func TestEngineTimeWallOnly(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 123456000, time.UTC)
	tb := newTimebase(clock.NewFake(start))
	if !tb.wallOnly {
		t.Fatalf("a fake clock's epoch taken for one with a monotonic reading")
	}
	bySub := timebase{epoch: tb.epoch} // wallOnly false: Sub's path
	rng := rand.New(rand.NewPCG(7, 8))
	spans := []time.Duration{0, 1, -1, 999, -999, 1000, -1000, 1001, -1001, time.Second, -time.Second,
		1<<63 - 1, -1 << 63, 292 * 365 * 24 * time.Hour, -292 * 365 * 24 * time.Hour}
	for range 100000 {
		spans = append(spans, time.Duration(rng.Int64N(1<<50)-1<<49), time.Duration(rng.Int64()))
	}
	far := []time.Time{{}, time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}
	for _, sec := range []int64{1 << 34, 1 << 35, 1 << 36, 1 << 40, 1 << 44, 1 << 50, 1 << 62} {
		far = append(far, time.Unix(sec, 1), time.Unix(-sec, 1))
	}
	for _, at := range far {
		if got, want := tb.engineTime(at), bySub.engineTime(at); got != want {
			t.Fatalf("engineTime(%v) = %d by the wall clock's readings, %d by Sub", at, got, want)
		}
	}
	for _, d := range spans {
		for _, at := range []time.Time{start.Add(d), start.Add(d).Add(d), start.AddDate(rng.IntN(4000)-2000, 0, 0).Add(d)} {
			if got, want := tb.engineTime(at), bySub.engineTime(at); got != want {
				t.Fatalf("engineTime(%v) = %d by the wall clock's readings, %d by Sub", at, got, want)
			}
		}
	}
	if real := newTimebase(nil); real.wallOnly {
		t.Fatalf("the system clock's epoch taken for one without a monotonic reading")
	}
}
