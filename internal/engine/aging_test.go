package engine

import "testing"

// TestFixedRankUndoesFixedOrder checks that a lane ranks a fixed-phase job
// from its packed key exactly as from the job: base priority, scaled by
// the interval when aging is on, then submission number.
func TestFixedRankUndoesFixedOrder(t *testing.T) {
	for _, p := range []agingParams{newAgingParams(Aging{}), newAgingParams(Aging{Interval: 5e6, Step: 10, MaxEffective: 100})} {
		for _, base := range []uint8{0, 1, 50, 99, 100} {
			for _, seq := range []uint64{0, 1, 12345, 1<<fixedSeqBits - 1} {
				j := &Job{base: base, seq: seq}
				want := rank{int64(base), seq}
				if p.on {
					want.eff *= p.interval
				}
				if got := p.fixedRank(j.fixedOrder()); got != want {
					t.Errorf("aging %v, base %d, seq %d: rank %+v, want %+v", p.on, base, seq, got, want)
				}
			}
		}
	}
}
