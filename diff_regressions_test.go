package fairsched

import "time"

// diffRegression is a workload on which the scheduler once went wrong,
// reduced to a few jobs, with the checks that show it.
type diffRegression struct {
	w    *diffWorkload
	opts diffOptions
}

// diffRegressions are the subtests of TestDifferentialRegressions.
var diffRegressions = map[string]diffRegression{
	// Not the scheduler's error but the driver's: in a batch, j2 runs
	// after j1 and replaces it, so it ends unrun as it is taken in; the
	// driver took that in only after the whole batch, so it took j2 for
	// waiting when j3 replaced it, and counted it replaced.
	"BatchMemberEndedUnrunBeforeTheNext": {&diffWorkload{
		Cfg: Config{
			MaxConcurrency: 1,
			Types: map[string]TypeConfig{"t0": {Tier: 2, DefaultCost: 400 * time.Millisecond, Duplicates: Supersede,
				Retry: RetryPolicy{Attempts: 3, Backoff: 300 * time.Millisecond}, Needs: map[string]int{"r0": 1, "r1": 1}}},
			IdleTTL:   time.Hour,
			Resources: map[string]int{"r0": 1, "r1": 3},
		},
		Jobs: []diffJob{
			{Job: Job{Needs: map[string]int{}}, At: 0 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1},                         // j0
			{Job: Job{Type: "t0"}, At: 0 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1},                                      // j1
			{Job: Job{Type: "t0"}, At: 0 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1, Fails: 1, After: []int{1}, Batch: 2}, // j2
			{Job: Job{Type: "t0"}, At: 0 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1, Delay: 7 * diffUnit, Batch: 2},       // j3
		},
	}, diffOptions{ref: true, stats: true, hook: true}},
	// A key idle for IdleTTL was forgotten by the very submission that
	// brought it back: enqueueLocked looked the key up, then forgetLocked
	// deleted it from s.keys, and the job was queued on the orphaned
	// record. The key's next job got a fresh record, so the key's cap was
	// counted twice: j1 and j2 ran together although key "z" may run one
	// job at a time. (Checked without the reference, whose first
	// complaint would be the key missing from s.keys.)
	"ForgottenKeyCapCountedTwice": {&diffWorkload{
		Cfg: Config{
			DefaultKey: KeyConfig{MaxConcurrency: 1},
			IdleTTL:    8 * diffUnit,
		},
		Jobs: []diffJob{
			{Job: Job{Key: "z"}, At: 0 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1}, // j0
			{Job: Job{Key: "z"}, At: 9 * diffUnit, Dur: 5 * diffUnit, CancelAt: -1}, // j1
			{Job: Job{Key: "z"}, At: 9 * diffUnit, Dur: 5 * diffUnit, CancelAt: -1}, // j2
		},
	}, diffOptions{stats: true, hook: true}},
	// The same bug as seen by the scheduler's own invariants: j2 was
	// queued on the orphaned record, which no longer counted among s.keys.
	"ForgottenKeyQueuedJobLost": {&diffWorkload{
		Cfg: Config{MaxConcurrency: 1, IdleTTL: 8 * diffUnit},
		Jobs: []diffJob{
			{Job: Job{Key: "z"}, At: 0 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1},  // j0
			{Job: Job{Key: "a"}, At: 2 * diffUnit, Dur: 10 * diffUnit, CancelAt: -1}, // j1
			{Job: Job{Key: "z"}, At: 9 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1},  // j2
		},
	}, diffOptions{ref: true, stats: true, hook: true}},
	// And as seen by the reference: after j1's submission the scheduler no
	// longer knew key "z" (its flow was gone from s.keys), while the
	// reference had it back brand-new.
	"ForgottenKeyOrphaned": {&diffWorkload{
		Cfg: Config{IdleTTL: 8 * diffUnit},
		Jobs: []diffJob{
			{Job: Job{Key: "z"}, At: 0 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1}, // j0
			{Job: Job{Key: "z"}, At: 9 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1}, // j1
		},
	}, diffOptions{ref: true}},
	// A refused SetKey changed something after all: key "a", idle past
	// IdleTTL, was forgotten (and its virtual time with it) before the
	// change was found to exceed MaxConcurrency with its reservation.
	"RefusedSetKeyForgotNothing": {&diffWorkload{
		Cfg: Config{
			MaxConcurrency: 1,
			Aging:          AgingConfig{Interval: 400 * time.Millisecond, Step: 10, UrgentThreshold: 100},
			IdleTTL:        3 * diffUnit,
		},
		Jobs: []diffJob{
			{Job: Job{Key: ""}, At: 7 * diffUnit, Dur: 9 * diffUnit, CancelAt: 15 * diffUnit},     // j0
			{Job: Job{Key: "a", Priority: 80}, At: 0 * diffUnit, Dur: 9 * diffUnit, CancelAt: -1}, // j1
			{Job: Job{Key: ""}, At: 7 * diffUnit, Dur: 9 * diffUnit, CancelAt: -1},                // j2
		},
		Changes: []diffKeyChange{
			{At: 14 * diffUnit, Key: "a", Set: &KeyConfig{Weight: 0.5, MinSlots: 2}},
		},
	}, diffOptions{engine: true, ref: true, stats: true}},
	// A duplicate joins a job held by a conflict and its resources and
	// raises it, within its grace period, to the urgent threshold: the
	// engine's Raise of a parked job must refile it in its wait lane and
	// into the lane's fresh urgent order, or the invariants break at once
	// (a job of base 80 misfiled, or in no urgent order). A long run
	// found it; it guards the raise of a held job.
	"RaisedHeldJobTurnsUrgent": {&diffWorkload{
		Cfg: Config{
			Resources: map[string]int{"r0": 1, "r1": 1},
			Aging: AgingConfig{GracePeriod: 300 * time.Millisecond, Interval: 500 * time.Millisecond,
				Step: 40, UrgentThreshold: 70},
			Types: map[string]TypeConfig{"t1": {ConflictGroup: "g1", Duplicates: JoinQueued,
				Needs: map[string]int{"r0": 1, "r1": 1}, DefaultPriority: 80}},
		},
		Jobs: []diffJob{
			{Job: Job{Type: "t1", ID: "x", Priority: 50}, At: 1 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1}, // j0
			{Job: Job{Type: "t1", ID: "x"}, At: 2 * diffUnit, Dur: 1 * diffUnit, CancelAt: -1},               // j1: joins j0
			{Job: Job{Type: "t1", ID: "x"}, At: 0 * diffUnit, Dur: 5 * diffUnit, CancelAt: -1},               // j2
		},
	}, diffOptions{ref: true, stats: true, hook: true}},
}
