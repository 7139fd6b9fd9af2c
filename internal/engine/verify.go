package engine

import (
	"errors"
	"math"
	"slices"
	"strconv"

	"github.com/fairsched/fairsched/internal/iheap"
)

// Verify checks every invariant of the engine's structures at now, and
// that no two running jobs share a conflict lock (but jobs adopted
// running, Adopt), returning the first violation. For tests, after every
// step; O(n). (The caps bind when a job starts, and SetMaxConcurrency,
// SetTierLimit, SetTypeLimit and SetKey may lower one below what already
// runs, as Adopt may raise what runs above one, so running > cap is not a
// violation here; the tests check every start against the caps in
// force.)
func (e *Engine) Verify(now int64) error {
	laneIdx := func(l *lane) int { return l.tyIdx }
	actIdx := func(f *flow) int { return f.actIdx }

	if _, due := e.NextDue(); due != e.MayBeDue() {
		return errorf("NextDue has a time: %v; MayBeDue says %v", due, e.MayBeDue())
	}

	// Hard limits.
	if len(e.running) != e.nrunning {
		return errorf("running list %d != nrunning %d", len(e.running), e.nrunning)
	}
	holders := map[conflictKey][]*Job{}
	tierRun := map[*tierState]int{}
	typeRun := map[*typeState]int{}
	keyRun := map[*keyState]int{}
	keyPausedRun := map[*keyState]int{}
	laneRun := map[*lane]int{}
	flowRun := map[*flow]int{}
	keyReserved := map[*keyState]int{}
	for i, r := range e.running {
		j := r.j
		if int(j.idx) != i || j.state != StateRunning || j.key != j.lane.key {
			return errorf("running[%d] has idx %d state %d, its own key %v", i, j.idx, j.state, j.key == j.lane.key)
		}
		tierRun[j.lane.typ.tier]++
		typeRun[j.lane.typ]++
		keyRun[j.lane.key]++
		laneRun[j.lane]++
		if j.lane.typ.paused {
			keyPausedRun[j.lane.key]++
		}
		flowRun[j.lane.flow]++
		if j.kind == Reserved {
			keyReserved[j.lane.key]++
		}
		if g := j.lane.typ.cfg.ConflictGroup; g != "" {
			ck := conflictKey{g, j.id}
			if lk := e.conflicts[ck]; lk == nil || r.lock != lk || lk.holder != j && !slices.Contains(lk.more, j) {
				return errorf("job %d runs in conflict group %v but does not hold its lock", j.seq, ck)
			}
			holders[ck] = append(holders[ck], j)
		} else if r.lock != nil {
			return errorf("job %d runs outside a conflict group but holds a lock", j.seq)
		}
	}
	// Two running jobs share a lock only if all but one were adopted
	// running (Adopt): the order never starts a job whose lock is held.
	for ck, js := range holders {
		if lk := e.conflicts[ck]; len(js) != 1+len(lk.more) {
			return errorf("conflict lock %v: %d holders listed, %d run", ck, 1+len(lk.more), len(js))
		}
		var started *Job
		for _, j := range js {
			if j.is(flagAdopted) {
				continue
			}
			if started != nil {
				return errorf("conflict overlap on %v: jobs %d and %d", ck, started.seq, j.seq)
			}
			started = j
		}
	}
	for _, t := range e.tiers {
		if tierRun[t] != t.running {
			return errorf("tier %d: running %d, counted %d", t.level, t.running, tierRun[t])
		}
		if !t.active.Verify(actIdx) {
			return errorf("tier %d: active heap broken", t.level)
		}
		for i := 0; i < t.active.Len(); i++ {
			f, key := t.active.At(i)
			if f.settledKey().Less(key) {
				return errorf("tier %d: flow of %q filed at settled V %v, above its %v", t.level, f.key.name, key, f.settledKey())
			}
			if f.pending+f.running == 0 {
				return errorf("tier %d: idle flow of key %q is active", t.level, f.key.name)
			}
			if f.v < 0 && t.floor >= 0 && f.v < t.floor-1e6 {
				return errorf("tier %d: flow of %q far below floor", t.level, f.key.name)
			}
		}
	}
	queued := 0
	for _, t := range e.types {
		if typeRun[t] != t.running {
			return errorf("type %q: running %d, counted %d", t.name, t.running, typeRun[t])
		}
		if !t.lanes.Verify(laneIdx) {
			return errorf("type %q: lane heap broken", t.name)
		}
		for i := 0; i < t.lanes.Len(); i++ {
			l, key := t.lanes.At(i)
			if l.flow.order().Less(key) {
				return errorf("type %q: lane of %q filed at %v, above its flow's %v", t.name, l.key.name, key, l.flow.order())
			}
			if l.n+l.nwaiting == 0 || l.key.cap.shut || l.typ != t {
				return errorf("type %q: lane of %q ready with n=%d capped=%v", t.name, l.key.name, l.n, l.key.cap.shut)
			}
		}
	}
	pendingKey := map[*keyState]int{}
	pendingFlow := map[*flow]int{}
	pendingType := map[*typeState]int{}
	nheld, nshut := 0, 0
	// pending counts the pending jobs of a lane's key, flow and type.
	pending := func(l *lane, n int) {
		pendingKey[l.key] += n
		pendingFlow[l.flow] += n
		pendingType[l.typ] += n
	}
	busyOwn, busyDefault := 0, 0
	for _, k := range e.keys {
		switch {
		case !k.ownConfig() && k.cfg != resolveKey(e.cfg.DefaultKey):
			return errorf("key %q: not configured, but its configuration %+v is not DefaultKey's", k.name, k.cfg)
		case k.busy() && k.ownConfig():
			busyOwn++
			if k.busyIdx < 0 || k.busyIdx >= len(e.busyOwn) || e.busyOwn[k.busyIdx] != k {
				return errorf("key %q: has work but is not at its place in the busy keys", k.name)
			}
		case k.busy():
			busyDefault++
			fallthrough
		default:
			if k.busyIdx >= 0 {
				return errorf("key %q: listed among the busy configured keys, with work %v", k.name, k.busy())
			}
		}
		if k.listed != k.busy() {
			return errorf("key %q: listed among the busy keys %v, has work %v", k.name, k.listed, k.busy())
		}
		if keyPausedRun[k] != k.pausedRunning {
			return errorf("key %q: running of paused types %d, counted %d", k.name, k.pausedRunning, keyPausedRun[k])
		}
		for _, l := range k.lanes {
			if laneRun[l] != l.running {
				return errorf("lane (%q, %q): running %d, counted %d", l.typ.name, k.name, l.running, laneRun[l])
			}
		}
		if keyRun[k] != k.running {
			return errorf("key %q: running %d, counted %d", k.name, k.running, keyRun[k])
		}
		if keyReserved[k] != k.reserved {
			return errorf("key %q: reserved %d, counted %d", k.name, k.reserved, keyReserved[k])
		}
		// A key's cap binds when a job starts; SetKey may lower it below
		// what already runs, so running > cap is not checked here. The
		// tests check every start against the caps in force.
		if k.cap.shut != k.blocked() {
			return errorf("key %q: capped flag %v, at cap %v, bucket empty %v", k.name, k.cap.shut, k.atCap(), k.bucket.empty)
		}
		if k.cap.shut {
			nshut++
		}
		n, err := e.verifyGate(&k.cap, heldByKey, "key "+strconv.Quote(k.name)+"'s cap", pending, now)
		if err != nil {
			return err
		}
		nheld += n
		for _, f := range k.flows {
			if flowRun[f] != f.running {
				return errorf("key %q tier %d: flow running %d, counted %d", k.name, f.tier.level, f.running, flowRun[f])
			}
			if (f.actIdx >= 0) != (f.pending+f.running > 0) {
				return errorf("key %q tier %d: active=%v with pending %d running %d", k.name, f.tier.level, f.actIdx >= 0, f.pending, f.running)
			}
		}
		if len(k.laneTypes) != len(k.lanes) {
			return errorf("key %q: %d lane types for %d lanes", k.name, len(k.laneTypes), len(k.lanes))
		}
		for _, l := range k.lanes {
			if (l.spareIdx >= 0) != (l.spareIdx >= 0 && l.spareIdx < len(l.typ.spare) && l.typ.spare[l.spareIdx] == l) ||
				k.idle && l.spareIdx < 0 {
				return errorf("key %q, idle %v: lane of type %q spare at %d, not listed there or not spare", k.name, k.idle, l.typ.name, l.spareIdx)
			}
		}
		for i, l := range k.lanes {
			if k.laneTypes[i] != l.typ {
				return errorf("key %q: lane %d of type %q listed as %q", k.name, i, l.typ.name, k.laneTypes[i].name)
			}
			n, err := e.verifyLaneHeaps(l, StateQueued, now)
			if err != nil {
				return err
			}
			nwaiting := 0
			for i, w := range l.attached {
				if w.attIdx != i || w.of != l {
					return errorf("key %q type %q: attached wait lane %d misfiled", k.name, l.typ.name, i)
				}
				nwaiting += w.n
			}
			if nwaiting != l.nwaiting {
				return errorf("key %q type %q: nwaiting %d, counted %d", k.name, l.typ.name, l.nwaiting, nwaiting)
			}
			queued += nwaiting
			queued += n
			pendingKey[k] += n
			pendingFlow[l.flow] += n
			pendingType[l.typ] += n
			ready := l.n+l.nwaiting > 0 && !k.cap.shut
			if ready != (l.tyIdx >= 0) {
				return errorf("key %q type %q: ready=%v but in type heap=%v", k.name, l.typ.name, ready, l.tyIdx >= 0)
			}
		}
	}
	if lk := e.spareLock; lk != nil && (e.conflicts[lk.key] == lk || lk.holder != nil || len(lk.more) > 0 || len(lk.waits) > 0) {
		return errorf("the spare conflict lock %v is in use", lk.key)
	}
	for ck, lk := range e.conflicts {
		if lk.key != ck {
			return errorf("conflict lock %v filed under %v", lk.key, ck)
		}
		if lk.holder == nil && len(lk.waits) == 0 {
			return errorf("empty conflict lock %v kept", ck)
		}
		if lk.shut != (lk.holder != nil) || lk.holder == nil && len(lk.more) > 0 {
			return errorf("conflict lock %v: shut %v, held %v, %d more holders", ck, lk.shut, lk.holder != nil, len(lk.more))
		}
		n, err := e.verifyGate(&lk.gate, heldByLock, "conflict lock", pending, now)
		if err != nil {
			return err
		}
		for _, j := range appendHeld(nil, &lk.gate) {
			if e.lockOf(j) != lk {
				return errorf("conflict lock %v holds job %d of another", ck, j.seq)
			}
		}
		nheld += n
	}
	for name, r := range e.resources {
		for _, g := range r.gates() {
			n, err := e.verifyGate(g, heldByResource, "resource "+name, pending, now)
			if err != nil {
				return err
			}
			for _, j := range appendHeld(nil, g) {
				if e.resHeld[j] != g {
					return errorf("resource %q holds job %d, filed under another gate", name, j.seq)
				}
			}
			nheld += n
		}
	}
	for _, g := range e.replicaGates() {
		n, err := e.verifyGate(g, heldByReplica, "replica gate", pending, now)
		if err != nil {
			return err
		}
		nheld += n
	}
	if queued != e.nqueued {
		return errorf("nqueued %d, counted %d", e.nqueued, queued)
	}
	if busyOwn != len(e.busyOwn) || busyDefault != e.busyDefault {
		return errorf("busy keys: %d configured listed, %d counted; %d others, %d counted",
			len(e.busyOwn), busyOwn, e.busyDefault, busyDefault)
	}
	if nshut != e.nkeysShut {
		return errorf("keys shut %d, counted %d", e.nkeysShut, nshut)
	}
	if nheld != e.nheld {
		return errorf("held %d, counted %d", e.nheld, nheld)
	}
	if queued+nheld != e.npending {
		return errorf("npending %d, counted %d", e.npending, queued+nheld)
	}
	for _, k := range e.keys {
		if pendingKey[k] != k.pending {
			return errorf("key %q: pending %d, counted %d", k.name, k.pending, pendingKey[k])
		}
		for _, f := range k.flows {
			if pendingFlow[f] != f.pending {
				return errorf("key %q tier %d: flow pending %d, counted %d", k.name, f.tier.level, f.pending, pendingFlow[f])
			}
		}
	}
	for _, t := range e.types {
		if pendingType[t] != t.pending {
			return errorf("type %q: pending %d, counted %d", t.name, t.pending, pendingType[t])
		}
	}
	if err := e.verifyKeys(); err != nil {
		return err
	}
	for _, k := range e.keys {
		for _, l := range k.lanes {
			if l.n > 0 && e.keys[k.name] != k {
				return errorf("queued jobs of a forgotten record of key %q", k.name)
			}
		}
	}
	if err := e.verifyGrace(now); err != nil {
		return err
	}
	if err := e.verifyUrgent(now); err != nil {
		return err
	}
	asideKey := map[*keyState]int{}
	asideType := map[*typeState]int{}
	if err := e.verifyTimers(now, asideKey, asideType); err != nil {
		return err
	}
	if err := e.verifyDeps(asideKey, asideType); err != nil {
		return err
	}
	if err := e.verifyAside(asideKey, asideType); err != nil {
		return err
	}
	if err := e.verifyRates(now); err != nil {
		return err
	}
	if err := e.verifyReplicas(); err != nil {
		return err
	}
	if err := e.verifyResources(); err != nil {
		return err
	}
	if err := e.verifyElsewhere(); err != nil {
		return err
	}
	counts := e.WaitCountsAll()
	sum := 0
	for _, n := range counts {
		sum += n
	}
	if sum != e.npending+e.naside {
		return errorf("wait counts add up to %d, %d jobs wait", sum, e.npending+e.naside)
	}
	byLane := e.waitCountsByLane()
	for why := range counts {
		if counts[why] != byLane[why] {
			return errorf("wait counts: %d for reason %d, lane by lane %d", counts[why], why, byLane[why])
		}
	}
	c := &e.counters
	if c.Submitted != c.Completed+c.Failed+c.Cancelled+c.Expired+c.DependencyFailed+uint64(e.nrunning+e.npending+e.naside) {
		return errorf("submitted %d != completed %d + failed %d + cancelled %d + expired %d + running %d + pending %d + delayed %d",
			c.Submitted, c.Completed, c.Failed, c.Cancelled, c.Expired, e.nrunning, e.npending, e.naside)
	}
	return nil
}

// verifyTimers checks the jobs that wait for a time: each has its timers
// in timed and is flagged, has not started (or keeps its deadline while it
// runs), and its timers are on the timeline exactly when they still have
// to act (a retry may set one already due); a delayed
// job's release timer is there; and the timeline holds nothing else. It
// counts the delayed jobs by key and type into delayedKey, delayedType.
func (e *Engine) verifyTimers(now int64, delayedKey map[*keyState]int, delayedType map[*typeState]int) error {
	onTimeline, graced := 0, 0
	for j, tm := range e.timed {
		if !j.is(flagTimed) {
			return errorf("job %d: has timers but is not flagged", j.seq)
		}
		switch j.state {
		case StateQueued, StateParked, StateDelayed, StatePaused, StateBlocked:
		case StateRunning:
			if tm.deadlineAt == 0 || tm.release.idx >= 0 || tm.deadline.idx >= 0 || tm.grace.idx >= 0 {
				return errorf("job %d: running with timers set, or kept with no deadline", j.seq)
			}
		default:
			return errorf("job %d: has timers in state %d", j.seq, j.state)
		}
		if tm.grace.idx >= 0 {
			graced++
			if j.state != StateQueued && j.state != StateParked || tm.grace.at != j.sub+e.aging.grace {
				return errorf("job %d: a grace timer at %d in state %d, submitted %d", j.seq, tm.grace.at, j.state, j.sub)
			}
		}
		if (j.state == StateDelayed) != (tm.release.idx >= 0) {
			return errorf("job %d: state %d, release timer on the timeline %v", j.seq, j.state, tm.release.idx >= 0)
		}
		if j.state == StateDelayed {
			delayedKey[j.lane.key]++
			delayedType[j.lane.typ]++
		}
		for _, t := range []*timer{&tm.release, &tm.deadline} {
			if t.idx < 0 {
				continue
			}
			onTimeline++
			if t.job != j {
				return errorf("job %d: a timer of kind %d for job %d", j.seq, int(t.kind), t.job.seq)
			}
			if e.timeline.heap.KeyOf(int(t.idx)).Hi != iheap.Int(t.at) {
				return errorf("job %d: timer filed under another time on the timeline", j.seq)
			}
		}
	}
	if onTimeline != e.timeline.heap.Len() {
		return errorf("timeline: %d timers, %d belong to waiting jobs", e.timeline.heap.Len(), onTimeline)
	}
	if graced != e.lateGrace.heap.Len() {
		return errorf("late grace ends: %d timers, %d belong to queued jobs", e.lateGrace.heap.Len(), graced)
	}
	return nil
}

// verifyAside checks the jobs set aside: each paused job is in the list of
// the key or type whose pause set it aside, at its index, and that one is
// paused (the other may be too); a key's paused flag follows pausedKeys;
// and the jobs set aside, delayed (counted by the caller into asideKey and
// asideType) and paused, are counted right.
func (e *Engine) verifyAside(asideKey map[*keyState]int, asideType map[*typeState]int) error {
	paused := 0
	check := func(list []*Job, by uint8, owner string) error {
		for i, j := range list {
			if j.state != StatePaused || j.held != by || int(j.idx) != i {
				return errorf("%s: paused job %d in state %d, held %d, at %d, listed at %d", owner, j.seq, j.state, j.held, j.idx, i)
			}
			if by == pausedByKey && !j.lane.key.paused || by == pausedByType && !j.lane.typ.paused {
				return errorf("%s: job %d is paused by what is not paused", owner, j.seq)
			}
			asideKey[j.lane.key]++
			asideType[j.lane.typ]++
		}
		paused += len(list)
		return nil
	}
	total := 0
	for _, k := range e.keys {
		if k.paused != e.keyPaused(k.name) {
			return errorf("key %q: paused %v, in pausedKeys %v", k.name, k.paused, e.keyPaused(k.name))
		}
		for _, j := range k.pausedJobs {
			if j.lane.key != k {
				return errorf("key %q lists job %d of key %q", k.name, j.seq, j.lane.key.name)
			}
		}
		if err := check(k.pausedJobs, pausedByKey, "key "+k.name); err != nil {
			return err
		}
		total += k.aside
	}
	nlanes := 0
	for _, k := range e.keys {
		nlanes += len(k.lanes)
		for _, f := range k.flows {
			for _, l := range f.lanes {
				if l.flow != f || l.key != k || l.typ.tier != f.tier {
					return errorf("key %q tier %d: flow lists lane (%q, %q) of another flow", k.name, f.tier.level, l.typ.name, l.key.name)
				}
			}
			nlanes -= len(f.lanes)
		}
	}
	if nlanes != 0 {
		return errorf("the keys' lanes and their flows' lists differ by %d", nlanes)
	}
	for _, t := range e.types {
		for i, l := range t.all {
			if l.typ != t || l.allIdx != i || e.keys[l.key.name] != l.key || l.key.lane(t) != l {
				return errorf("type %q: lane %d of type %q, key %q, listed at %d", t.name, l.allIdx, l.typ.name, l.key.name, i)
			}
		}
		nlanes += len(t.all)
		for i, l := range t.spare {
			if l.typ != t || l.spareIdx != i || l.key.lane(t) != l || l.tyIdx != -1 ||
				l.n != 0 || l.running != 0 || l.nwaiting != 0 || len(l.attached) != 0 || len(l.held) != 0 ||
				l.run.len() != 0 || l.fixed.Len() != 0 || l.rising.Len() != 0 || l.capped.Len() != 0 {
				return errorf("type %q: spare lane %d (key %q, at %d) is not an empty lane of its key: ready %v, %d queued, %d running",
					t.name, i, l.key.name, l.spareIdx, l.tyIdx >= 0, l.n, l.running)
			}
		}
	}
	for _, k := range e.keys {
		nlanes -= len(k.lanes)
	}
	if nlanes != 0 {
		return errorf("the types list %d lanes more than the keys", nlanes)
	}
	for _, t := range e.types {
		for _, j := range t.pausedJobs {
			if j.lane.typ != t {
				return errorf("type %q lists job %d of type %q", t.name, j.seq, j.lane.typ.name)
			}
		}
		if err := check(t.pausedJobs, pausedByType, "type "+t.name); err != nil {
			return err
		}
	}
	// Every wait lane is listed by the lane its jobs come from.
	listed, waits := 0, 0
	for _, k := range e.keys {
		if asideKey[k] != k.aside {
			return errorf("key %q: %d set aside, counted %d", k.name, k.aside, asideKey[k])
		}
		for _, l := range k.lanes {
			for i, w := range l.held {
				if w.heldIdx != i || w.of != l || w.gate.waits[l] != w {
					return errorf("key %q: wait lane listed at %d has index %d", k.name, i, w.heldIdx)
				}
			}
			listed += len(l.held)
		}
		waits += len(k.cap.waits)
	}
	for _, lk := range e.conflicts {
		waits += len(lk.gate.waits)
	}
	for _, r := range e.resources {
		for _, g := range r.gates() {
			waits += len(g.waits)
		}
	}
	for _, g := range e.replicaGates() {
		waits += len(g.waits)
	}
	if listed != waits {
		return errorf("%d wait lanes, %d listed by their lanes", waits, listed)
	}
	for _, t := range e.types {
		if asideType[t] != t.aside {
			return errorf("type %q: %d set aside, counted %d", t.name, t.aside, asideType[t])
		}
	}
	npausing := len(e.pausedKeys)
	for _, t := range e.types {
		if t.paused {
			npausing++
		}
	}
	if npausing != e.npausing {
		return errorf("npausing %d, %d keys and types paused", e.npausing, npausing)
	}
	if total != e.naside || paused != e.npaused {
		return errorf("naside %d, npaused %d; counted %d, %d", e.naside, e.npaused, total, paused)
	}
	return nil
}

// verifyGraceLocked checks the grace queue: each entry is a job that has
// not ended, numbered where it stands, holes are counted, and every queued
// job in its fixed phase whose grace is not over has an entry.
func (e *Engine) verifyGrace(now int64) error {
	g := &e.grace
	holes := 0
	for i, j := range g.buf[g.head:] {
		switch {
		case j == nil:
			holes++
		case !j.inGrace || j.at != g.base+int64(g.head+i):
			return errorf("grace queue: job %d at entry %d has inGrace=%v, number %d", j.seq, g.base+int64(g.head+i), j.inGrace, j.at)
		case j.state == StateDone:
			return errorf("grace queue: holds ended job %d", j.seq)
		}
	}
	if holes != g.holes {
		return errorf("grace queue: %d holes, counted %d", holes, g.holes)
	}
	filed := func(j *Job) bool {
		i := j.at - g.base
		return i >= int64(g.head) && i < int64(len(g.buf)) && g.buf[i] == j
	}
	for _, r := range e.running {
		if j := r.j; j.inGrace {
			return errorf("running job %d kept its grace entry", j.seq)
		}
	}
	var others []*Job // pending jobs outside the fixed phase, which may keep an entry
	gates := e.allGates()
	for _, g := range gates {
		for _, w := range g.waits {
			others = appendJobs(others, &w.rising)
			others = appendJobs(others, &w.capped)
		}
	}
	for _, k := range e.keys {
		for _, l := range k.lanes {
			for i := 0; i < l.rising.Len(); i++ {
				j, _ := l.rising.At(i)
				others = append(others, j)
			}
			for i := 0; i < l.capped.Len(); i++ {
				j, _ := l.capped.At(i)
				others = append(others, j)
			}
		}
	}
	for _, j := range others {
		if j.inGrace && !filed(j) {
			return errorf("job %d (state %d) has inGrace but no entry %d", j.seq, j.state, j.at)
		}
	}
	if !e.aging.on || e.aging.grace == 0 {
		return nil
	}
	check := func(j *Job) error {
		lateGrace := j.is(flagTimed) && e.timed[j].grace.idx >= 0 // a retried job's (delay.go)
		if !e.aging.pastGrace(j.sub, now) && !j.inGrace && !lateGrace || j.inGrace && !filed(j) {
			return errorf("job %d in its grace period: inGrace=%v, entry %d not its own", j.seq, j.inGrace, j.at)
		}
		return nil
	}
	lanes := []*lane{}
	for _, k := range e.keys {
		lanes = append(lanes, k.lanes...)
	}
	for _, g := range gates {
		for _, w := range g.waits {
			lanes = append(lanes, &w.lane)
		}
	}
	for _, l := range lanes {
		{
			for _, e := range l.run.buf[l.run.head:] {
				if e.j != nil {
					if err := check(e.j); err != nil {
						return err
					}
				}
			}
			for i := 0; i < l.fixed.Len(); i++ {
				if j, _ := l.fixed.At(i); check(j) != nil {
					return check(j)
				}
			}
		}
	}
	return nil
}

// allGates returns every gate that may hold jobs.
func (e *Engine) allGates() []*gate {
	gates := []*gate{}
	for _, k := range e.keys {
		gates = append(gates, &k.cap)
	}
	for _, lk := range e.conflicts {
		gates = append(gates, &lk.gate)
	}
	for _, r := range e.resources {
		gates = append(gates, r.gates()...)
	}
	gates = append(gates, e.replicaGates()...)
	return gates
}

// verifyUrgent checks the urgent orders (urgent.go). A type's holds
// exactly its queued jobs, and a wait lane's exactly its held jobs, that
// are urgent or may become so: each past its grace period in aged, under
// its aged key; each in its grace period and based at or above the
// threshold in fresh, under its fixed order, with its grace end still to
// be applied (an entry in the grace queue, or a grace timer), which moves
// it to aged; no other. Until that end is applied, a job past its grace
// period may still be where its grace period put it. A wait lane is in
// its type's openWaits and openFresh exactly while it is attached and has
// jobs in aged and in fresh, under its first one's key. O(n).
func (e *Engine) verifyUrgent(now int64) error {
	p := &e.aging
	check := func(what string, u *urgentSet, jobs []*Job) error {
		if !u.aged.Verify(func(j *Job) int { return int(j.uidx) }) || !u.fresh.Verify((*Job).freshIdx) {
			return errorf("%s: an urgent order is broken", what)
		}
		mine := make(map[*Job]bool, len(jobs))
		aged, fresh := 0, 0
		for _, j := range jobs {
			mine[j] = true
			past := p.pastGrace(j.sub, now)
			graceDue := j.inGrace || j.is(flagTimed) && e.timed[j].grace.idx >= 0
			inGracePhase := !past || graceDue
			wantFresh := p.urgentOn() && int64(j.base) >= p.urgent
			switch {
			case j.uidx >= 0:
				aged++
				if !p.urgentOn() || !past {
					return errorf("%s: job %d in the aged urgent order, in its grace period", what, j.seq)
				}
			case j.uidx < -1:
				fresh++
				if !wantFresh || !inGracePhase {
					return errorf("%s: job %d of base %d in the fresh urgent order, past its grace period %v, its end due %v",
						what, j.seq, j.base, past, graceDue)
				}
			case p.urgentOn() && (past && !graceDue || wantFresh):
				return errorf("%s: job %d of base %d in no urgent order, past its grace period %v, its end due %v",
					what, j.seq, j.base, past, graceDue)
			}
		}
		if aged != u.aged.Len() || fresh != u.fresh.Len() {
			return errorf("%s: urgent orders hold %d and %d jobs, %d and %d are filed in them",
				what, u.aged.Len(), u.fresh.Len(), aged, fresh)
		}
		for i := 0; i < u.aged.Len(); i++ {
			if j, key := u.aged.At(i); !mine[j] || key != j.agedOrder() {
				return errorf("%s: job %d misfiled in the aged urgent order", what, j.seq)
			}
		}
		for i := 0; i < u.fresh.Len(); i++ {
			if j, key := u.fresh.At(i); !mine[j] || key != (iheap.Key{Hi: j.fixedOrder()}) {
				return errorf("%s: job %d misfiled in the fresh urgent order", what, j.seq)
			}
		}
		return nil
	}
	open := map[*typeState][2]int{}
	for _, g := range e.allGates() {
		for _, w := range g.waits {
			if err := check("a wait lane", &w.urgent, appendLane(nil, &w.lane)); err != nil {
				return err
			}
			for i, f := range []struct {
				in  *iheap.Keyed[*waitLane]
				idx int
				h   *iheap.Keyed[*Job]
			}{{&w.typ.openWaits, w.openIdx, &w.urgent.aged}, {&w.typ.openFresh, w.freshIdx, &w.urgent.fresh}} {
				_, top, ok := f.h.TopKey()
				switch {
				case (f.idx >= 0) != (ok && w.attIdx >= 0):
					return errorf("a wait lane: filed open %v, attached %v, with %d in its urgent order %d", f.idx >= 0, w.attIdx >= 0, f.h.Len(), i)
				case f.idx >= 0 && f.in.KeyOf(f.idx) != top:
					return errorf("a wait lane: filed open under a stale key")
				case f.idx >= 0:
					n := open[w.typ]
					n[i]++
					open[w.typ] = n
				}
			}
		}
	}
	for _, t := range e.types {
		var jobs []*Job
		for _, l := range t.all {
			jobs = appendLane(jobs, l)
		}
		if err := check("type "+strconv.Quote(t.name), &t.urgent, jobs); err != nil {
			return err
		}
		if !t.openWaits.Verify(func(w *waitLane) int { return w.openIdx }) ||
			!t.openFresh.Verify(func(w *waitLane) int { return w.freshIdx }) {
			return errorf("type %q: an open wait lanes heap is broken", t.name)
		}
		if n := open[t]; n[0] != t.openWaits.Len() || n[1] != t.openFresh.Len() {
			return errorf("type %q: %d and %d open wait lanes filed, %d and %d hold", t.name, n[0], n[1], t.openWaits.Len(), t.openFresh.Len())
		}
	}
	return nil
}

// verifyKeys checks that every key reachable from a queued or
// running job is the one the engine files under its name.
func (e *Engine) verifyKeys() error {
	for _, r := range e.running {
		if j := r.j; e.keys[j.lane.key.name] != j.lane.key {
			return errorf("running job %d belongs to a forgotten record of key %q", j.seq, j.lane.key.name)
		}
	}
	return nil
}

// errorf formats a Verify failure with %d, %q and %v. The engine does not
// import fmt, which would bring sync and os into its dependencies, and its
// messages need only these verbs over a few types.
func errorf(format string, args ...any) error {
	var b []byte
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) || len(args) == 0 {
			b = append(b, format[i])
			continue
		}
		i++
		b = appendArg(b, format[i], args[0])
		args = args[1:]
	}
	return errors.New(string(b))
}

func appendArg(b []byte, verb byte, arg any) []byte {
	switch v := arg.(type) {
	case string:
		if verb == 'q' {
			return strconv.AppendQuote(b, v)
		}
		return append(b, v...)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int32:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case uint64:
		return strconv.AppendUint(b, v, 10)
	case uint8:
		return strconv.AppendUint(b, uint64(v), 10)
	case State:
		return strconv.AppendUint(b, uint64(v), 10)
	case bool:
		return strconv.AppendBool(b, v)
	case float64:
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	case iheap.Key:
		b = append(b, '{')
		b = strconv.AppendUint(b, v.Hi, 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, v.Lo, 10)
		return append(b, '}')
	case conflictKey:
		b = append(b, '{')
		b = strconv.AppendQuote(b, v.group)
		b = append(b, ' ')
		b = strconv.AppendQuote(b, v.id)
		return append(b, '}')
	}
	return append(b, "%!(unsupported)"...)
}

// verifyLaneHeaps checks the run and heaps of a lane (or a wait lane):
// each job filed where it says, under its own key, in order, in the state
// given, in the run or heap its phase at now calls for. It returns the
// number of jobs, which must be the lane's n.
func (e *Engine) verifyLaneHeaps(l *lane, state State, now int64) (int, error) {
	byIdx := func(j *Job) int { return int(j.idx) }
	var jobs []*Job
	var runErr error
	var last *Job
	l.run.each(func(j *Job, key uint64) {
		switch {
		case j.heap != inRun || j.idx < 0 || int(j.idx) >= len(l.run.buf) ||
			l.run.buf[j.idx] != (runEntry{key, j.sub, j}) || key != j.fixedOrder():
			runErr = errorf("job %d misfiled in a sorted run", j.seq)
		case last != nil && (key <= last.fixedOrder() || j.seq <= last.seq || j.sub < last.sub):
			runErr = errorf("job %d out of order in a sorted run", j.seq)
		}
		last = j
		jobs = append(jobs, j)
	})
	if runErr != nil {
		return 0, runErr
	}
	switch {
	case l.run.head < len(l.run.buf) && l.run.first != l.run.buf[l.run.head]:
		return 0, errorf("key %q type %q: sorted run's front copy is stale", l.key.name, l.typ.name)
	case l.run.head == len(l.run.buf) && l.run.first != (runEntry{}):
		return 0, errorf("key %q type %q: empty sorted run keeps a front entry", l.key.name, l.typ.name)
	}
	if l.run.head < len(l.run.buf) && l.run.buf[l.run.head].j == nil {
		return 0, errorf("key %q type %q: a sorted run starts with a hole", l.key.name, l.typ.name)
	}
	holes := 0
	for _, e := range l.run.buf[l.run.head:] {
		if e.j == nil {
			holes++
		}
	}
	if holes != l.run.holes {
		return 0, errorf("key %q type %q: sorted run counts %d holes, has %d", l.key.name, l.typ.name, l.run.holes, holes)
	}
	for i := 0; i < l.fixed.Len(); i++ {
		j, key := l.fixed.At(i)
		if j.heap != inFixed || key != (iheap.Key{Hi: j.fixedOrder()}) {
			return 0, errorf("job %d misfiled in a fixed heap", j.seq)
		}
		jobs = append(jobs, j)
	}
	for i := 0; i < l.rising.Len(); i++ {
		j, key := l.rising.At(i)
		if j.heap != inRising || key != j.agedOrder() {
			return 0, errorf("job %d misfiled in a rising heap", j.seq)
		}
		jobs = append(jobs, j)
	}
	for i := 0; i < l.capped.Len(); i++ {
		j, key := l.capped.At(i)
		if j.heap != inCapped || key != (iheap.Key{Hi: j.seq}) {
			return 0, errorf("job %d misfiled in a capped heap", j.seq)
		}
		jobs = append(jobs, j)
	}
	if !l.fixed.Verify(byIdx) || !l.rising.Verify(byIdx) || !l.capped.Verify(byIdx) {
		return 0, errorf("key %q type %q: a lane heap is broken", l.key.name, l.typ.name)
	}
	p := &e.aging
	for _, j := range jobs {
		if j.state != state || j.lane.typ != l.typ || j.lane.key != l.key || j.key != l.key || j.is(flagAdopted) {
			return 0, errorf("job %d in a lane heap has state %d, adopted %v, its own key %v", j.seq, j.state, j.is(flagAdopted), j.key == l.key)
		}
		// Each job's place is its phase's: fixed (its heap) in its grace
		// period, and for ever when it is based at or above the ceiling;
		// rising or capped after, once its grace end is applied. Until
		// then, a job past its grace period may be in either: where its
		// grace period put it, or where a gate that let it go filed it. A
		// job in the sorted run may be in any phase (sortedrun.go).
		if j.heap == inRun {
			continue
		}
		fixed := j.heap == inFixed
		graceDue := j.inGrace || j.is(flagTimed) && e.timed[j].grace.idx >= 0
		aged := p.pastGrace(j.sub, now) && int64(j.base) < p.maxEff
		if fixed == aged && !(fixed && graceDue) {
			return 0, errorf("job %d of base %d filed fixed %v, in its grace period %v, its end due %v",
				j.seq, j.base, fixed, !p.pastGrace(j.sub, now), graceDue)
		}
	}
	if len(jobs) != l.n {
		return 0, errorf("key %q type %q: lane n=%d, counted %d", l.key.name, l.typ.name, l.n, len(jobs))
	}
	return len(jobs), nil
}

// verifyGate checks the jobs gate g (which by says) holds: each wait lane
// filed under the lane its jobs come from, not empty, attached exactly
// while g is open and then at its place among its lane's, its heaps in
// order, its jobs held by g (its urgent order: verifyUrgent). It counts
// the jobs into pending and returns how many it holds out of sight.
func (e *Engine) verifyGate(g *gate, by uint8, what string, pending func(*lane, int), now int64) (int, error) {
	held := 0
	for l, w := range g.waits {
		if w.of != l || w.gate != g || w.n == 0 {
			return 0, errorf("%s: wait lane misfiled or empty (%d jobs)", what, w.n)
		}
		if attached := w.attIdx >= 0; attached == g.shut {
			return 0, errorf("%s: wait lane attached %v, gate shut %v", what, attached, g.shut)
		}
		if w.attIdx >= 0 && (w.attIdx >= len(l.attached) || l.attached[w.attIdx] != w) {
			return 0, errorf("%s: wait lane not at its place among its lane's", what)
		}
		n, err := e.verifyLaneHeaps(&w.lane, StateParked, now)
		if err != nil {
			return 0, err
		}
		for _, j := range appendHeld(nil, &gate{waits: map[*lane]*waitLane{l: w}}) {
			if j.held != by || j.lane != l {
				return 0, errorf("%s: job %d held by %d, from another lane", what, j.seq, j.held)
			}
		}
		pending(l, n)
		if w.attIdx < 0 {
			held += n
		}
	}
	return held, nil
}

// verifyRates checks the token buckets: a bucket is empty exactly when it
// has a rate and no token at now, and then it is on the rateline at the
// time of its next token; the rateline holds nothing else.
func (e *Engine) verifyRates(now int64) error {
	n := 0
	check := func(b *bucket, owner string) error {
		want := b.rate.Period > 0 && b.due() > now
		if b.empty != want || (b.idx >= 0) != b.empty {
			return errorf("%s: bucket empty %v, a token due at %d (now %d), on the rateline %v", owner, b.empty, b.due(), now, b.idx >= 0)
		}
		if b.empty {
			n++
			if got, want := e.rateline.KeyOf(int(b.idx)), b.order(); got != want {
				return errorf("%s: on the rateline at %v, due at %v", owner, got, want)
			}
		}
		if b.rate.Period > 0 && (!e.rated || b.rate.Burst < 1) {
			return errorf("%s: rate %+v, rated %v", owner, b.rate, e.rated)
		}
		return nil
	}
	for _, k := range e.keys {
		if k.bucket.key != k || k.bucket.rate != k.cfg.Rate {
			return errorf("key %q: bucket of another key (%v), or with rate %+v, configured %+v", k.name, k.bucket.key != k, k.bucket.rate, k.cfg.Rate)
		}
		if err := check(&k.bucket, "key "+k.name); err != nil {
			return err
		}
	}
	for _, t := range e.types {
		if t.bucket.typ != t {
			return errorf("type %q: bucket of another type", t.name)
		}
		if err := check(&t.bucket, "type "+t.name); err != nil {
			return err
		}
	}
	if n != e.rateline.Len() {
		return errorf("rateline: %d buckets, %d empty", e.rateline.Len(), n)
	}
	return nil
}

// verifyDeps checks the dependency graph: every node is a linked job that
// has not ended, with edges left; every edge is listed by both its ends,
// at its index among its dependency's dependants; a job that still waits
// for a dependency is delayed or blocked, and a blocked one waits for one.
// It counts the blocked jobs by key and type into asideKey, asideType.
func (e *Engine) verifyDeps(asideKey map[*keyState]int, asideType map[*typeState]int) error {
	blocked := 0
	for j, n := range e.deps {
		if !j.is(flagLinked) || j.state == StateDone || len(n.after)+len(n.dependants) == 0 {
			return errorf("job %d: in the graph, linked %v, state %d, %d edges", j.seq, j.is(flagLinked), j.state, len(n.after)+len(n.dependants))
		}
		for _, ed := range n.after {
			dn := e.deps[ed.dep]
			if ed.dependant != j || dn == nil || ed.idx >= len(dn.dependants) || dn.dependants[ed.idx] != ed {
				return errorf("job %d: an edge from job %d not listed by it", j.seq, ed.dep.seq)
			}
		}
		if len(n.after) > 0 && j.state != StateDelayed && j.state != StateBlocked {
			return errorf("job %d: waits for %d dependencies in state %d", j.seq, len(n.after), j.state)
		}
		if j.state == StateBlocked {
			if len(n.after) == 0 {
				return errorf("job %d: blocked with no dependency left", j.seq)
			}
			blocked++
			asideKey[j.lane.key]++
			asideType[j.lane.typ]++
		}
		for i, ed := range n.dependants {
			dn := e.deps[ed.dependant]
			if ed.dep != j || ed.idx != i || dn == nil || !slices.Contains(dn.after, ed) {
				return errorf("job %d: dependant %d listed at %d (index %d) not waiting for it", j.seq, ed.dependant.seq, i, ed.idx)
			}
		}
	}
	if blocked != e.nblocked {
		return errorf("nblocked %d, counted %d", e.nblocked, blocked)
	}
	return nil
}

// verifyResources checks the named resources: the units in use are the
// running jobs' needs, and its holders are those jobs with their
// expected ends; a resource's gate is shut only while a job claims it, a
// waiting job that needs it and claims every resource it needs; its
// skipped gate, always shut, holds only while it is claimed, and at most
// lookahead jobs, none its claimant; its short gate holds only its
// claimant and its tooBig gate is always shut;
// a claimant's start, where it is kept, is the one its resources give;
// every job a resource's gate holds is parked by it and needs it; and the
// jobs with needs of their own are counted.
func (e *Engine) verifyResources() error {
	used := map[*resource]int{}
	held := map[*resource]map[*Job]int{}
	for _, r := range e.running {
		for _, n := range e.needsOf(r.j) {
			used[n.r] += n.units
			if held[n.r] == nil {
				held[n.r] = map[*Job]int{}
			}
			held[n.r][r.j] = n.units
		}
	}
	needs := func(j *Job, r *resource) bool {
		return slices.ContainsFunc(e.needsOf(j), func(n need) bool { return n.r == r })
	}
	for name, r := range e.resources {
		if r.used != used[r] {
			return errorf("resource %q: %d units in use, running jobs need %d", name, r.used, used[r])
		}
		if len(r.holders) != len(held[r]) {
			return errorf("resource %q: %d holders, %d running jobs need it", name, len(r.holders), len(held[r]))
		}
		for j, h := range r.holders {
			if h.units != held[r][j] || h.end < j.at {
				return errorf("resource %q: job %d holds %d units until %d, needs %d from %d", name, j.seq, h.units, h.end, held[r][j], j.at)
			}
		}
		if r.gate.shut && r.claimant == nil || !r.skipped.shut || !r.short.shut || !r.tooBig.shut {
			return errorf("resource %q: gate shut %v with claimant %v, skipped shut %v, short shut %v, tooBig shut %v",
				name, r.gate.shut, r.claimant != nil, r.skipped.shut, r.short.shut, r.tooBig.shut)
		}
		for _, g := range r.gates() {
			if g.res != r {
				return errorf("resource %q: a gate of another resource", name)
			}
		}
		skipped := appendHeld(nil, &r.skipped)
		if len(skipped) > 0 && r.claimant == nil || len(skipped) > e.cfg.BackfillLookahead || r.skipped.len() != len(skipped) {
			return errorf("resource %q: %d jobs skipped (counted %d) with claimant %v, lookahead %d",
				name, len(skipped), r.skipped.len(), r.claimant != nil, e.cfg.BackfillLookahead)
		}
		if r.claimant != nil && slices.Contains(skipped, r.claimant) {
			return errorf("resource %q: its claimant, job %d, skipped", name, r.claimant.seq)
		}
		if c := r.claimant; c != nil && (c.state != StateQueued && c.state != StateParked || !needs(c, r)) {
			return errorf("resource %q: claimed by job %d in state %d", name, c.seq, c.state)
		}
		if c := r.claimant; c != nil {
			for _, n := range e.needsOf(c) {
				if n.r.claimant != c {
					return errorf("resource %q: claimed by job %d, which does not claim %q", name, c.seq, n.r.name)
				}
			}
		}
		for _, j := range appendHeld(nil, &r.short) {
			if j != r.claimant {
				return errorf("resource %q: its short gate holds job %d, not its claimant", name, j.seq)
			}
		}
	}
	for c, at := range e.claimStarts {
		start := int64(math.MinInt64)
		for _, n := range e.needsOf(c) {
			if n.r.claimant != c {
				return errorf("job %d: a start kept, but it does not claim %q", c.seq, n.r.name)
			}
			start = max(start, n.r.freeAt(n.units))
		}
		if at != start {
			return errorf("job %d: start %d kept, its resources give %d", c.seq, at, start)
		}
	}
	for j, g := range e.resHeld {
		if j.state != StateParked || j.held != heldByResource || g.res == nil || !needs(j, g.res) || g.waits[j.lane] == nil {
			return errorf("job %d: held by resource gate in state %d, held %d", j.seq, j.state, j.held)
		}
	}
	if e.nown != len(e.ownNeeds) {
		return errorf("nown %d, %d jobs with needs of their own", e.nown, len(e.ownNeeds))
	}
	byKey := 0
	for name, n := range e.reservedKeys {
		if n <= 0 {
			return errorf("key %q: %d jobs reserved", name, n)
		}
		byKey += n
	}
	if e.reserved != byKey {
		return errorf("%d jobs reserved, %d by key", e.reserved, byKey)
	}
	for j := range e.ownNeeds {
		if j.state == StateDone {
			return errorf("job %d: ended with needs of its own kept", j.seq)
		}
	}
	return nil
}

// verifyReplicas checks the replicas (replicas.go): the known ones are
// listed by name, at their places; a record not known counts running
// jobs or holds jobs bound to it; each replica counts the running jobs
// placed on it, and only running jobs are placed, a bound one on its
// replica, only once one was set; only jobs that have not ended are bound;
// a replica gate holds only jobs it is the gate of, and it is shut only
// while every replica they may run on runs its capacity.
func (e *Engine) verifyReplicas() error {
	if !e.replicated && (len(e.replicaByName) > 0 || len(e.placedOn) > 0) {
		return errorf("replicas kept, none ever set")
	}
	for i, r := range e.replicas {
		if !r.known || r.idx != i || e.replicaByName[r.name] != r || i > 0 && e.replicas[i-1].name >= r.name {
			return errorf("replica %q listed at %d: known %v, idx %d", r.name, i, r.known, r.idx)
		}
	}
	running := map[*replica]int{}
	for j, r := range e.placedOn {
		if j.state != StateRunning || !j.is(flagPlaced) {
			return errorf("job %d placed on replica %q in state %d", j.seq, r.name, j.state)
		}
		if j.is(flagBound) && e.boundTo[j] != r.name { // (a replica's types may change after a start)
			return errorf("job %d bound to %q placed on replica %q", j.seq, e.boundTo[j], r.name)
		}
		running[r]++
	}
	for _, rj := range e.running {
		if rj.j.is(flagPlaced) != (e.placedOn[rj.j] != nil) {
			return errorf("job %d: placed %v, on %v", rj.j.seq, rj.j.is(flagPlaced), e.placedOn[rj.j])
		}
	}
	known := 0
	for name, r := range e.replicaByName {
		if r.name != name || r.gate.rep != r {
			return errorf("replica %q filed under %q", r.name, name)
		}
		if running[r] != r.running {
			return errorf("replica %q: running %d, counted %d", name, r.running, running[r])
		}
		if r.known {
			known++
		} else if r.running == 0 && len(r.gate.waits) == 0 {
			return errorf("replica %q: neither known nor used, kept", name)
		}
		for _, j := range appendHeld(nil, &r.gate) {
			if !j.is(flagBound) || e.boundTo[j] != name {
				return errorf("replica %q holds job %d, bound to %q", name, j.seq, e.boundTo[j])
			}
		}
		if r.gate.shut && r.free() {
			return errorf("replica %q: its gate is shut, and it has a free slot", name)
		}
	}
	if known != len(e.replicas) {
		return errorf("%d replicas known, %d listed", known, len(e.replicas))
	}
	for j := range e.boundTo {
		if !j.is(flagBound) || j.state == StateDone || j.state == StateNew {
			return errorf("job %d bound in state %d", j.seq, j.state)
		}
	}
	for _, t := range e.types {
		for _, j := range appendHeld(nil, &t.rgate) {
			if j.is(flagBound) {
				return errorf("type %q's replica gate holds job %d, bound to %q", t.name, j.seq, e.boundTo[j])
			}
		}
		if t.rgate.shut && e.typeReplicaWhy(t) == WhyTurn {
			return errorf("type %q: its replica gate is shut, and a replica for it has a free slot", t.name)
		}
	}
	return nil
}

// waitCountsByLane is what WaitCountsAll returns, counted lane by lane,
// each with what holds all its jobs (laneWhy) and, for those waiting
// their turn, their wait lanes by their gates: O(lanes + their wait
// lanes), which WaitCountsAll, counting by what holds jobs, is not.
func (e *Engine) waitCountsByLane() [NumReasons]int {
	n := e.asideCounts()
	for _, k := range e.keys {
		if k.pending == 0 {
			continue
		}
		for _, l := range k.lanes {
			if why := laneWhy(l); why != WhyTurn {
				n[why] += l.n
				for _, w := range l.held {
					n[why] += w.n
				}
				continue
			}
			n[WhyTurn] += l.n
			for _, w := range l.held {
				if !w.gate.shut || w.gate == &k.cap {
					n[WhyTurn] += w.n
				} else {
					n[e.gateWhy(w)] += w.n
				}
			}
		}
	}
	return n
}
