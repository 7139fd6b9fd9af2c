package fairsched

import (
	"fmt"

	"github.com/fairsched/fairsched/internal/iheap"
)

// verifyLocked checks every invariant of the scheduler's structures and the
// hard limits of SPEC section 2, returning the first violation. For tests;
// O(n). The caller holds s.mu.
func (s *Scheduler) verifyLocked() error {
	byIdx := func(j *job) int { return int(j.idx) }
	byUIdx := func(j *job) int { return int(j.uidx) }
	laneIdx := func(l *lane) int { return l.tyIdx }
	actIdx := func(f *flow) int { return f.actIdx }
	kpIdx := func(k *keyState) int { return k.kpIdx }

	// Hard limits.
	if s.cfg.MaxConcurrency > 0 && s.nrunning > s.cfg.MaxConcurrency {
		return fmt.Errorf("running %d > MaxConcurrency %d", s.nrunning, s.cfg.MaxConcurrency)
	}
	if len(s.running) != s.nrunning {
		return fmt.Errorf("running list %d != nrunning %d", len(s.running), s.nrunning)
	}
	holders := map[conflictKey]*job{}
	tierRun := map[*tierState]int{}
	typeRun := map[*typeState]int{}
	keyRun := map[*keyState]int{}
	flowRun := map[*flow]int{}
	keyReserved := map[*keyState]int{}
	for i, j := range s.running {
		if int(j.idx) != i || j.state != stateRunning {
			return fmt.Errorf("running[%d] has idx %d state %d", i, j.idx, j.state)
		}
		tierRun[j.lane.typ.tier]++
		typeRun[j.lane.typ]++
		keyRun[j.lane.key]++
		flowRun[j.lane.flow]++
		if j.kind == startReserved {
			keyReserved[j.lane.key]++
		}
		if g := j.lane.typ.cfg.ConflictGroup; g != "" {
			ck := conflictKey{g, j.id}
			if other := holders[ck]; other != nil {
				return fmt.Errorf("conflict overlap on %v: jobs %d and %d", ck, other.seq, j.seq)
			}
			holders[ck] = j
			if sl := s.conflicts[ck]; sl == nil || sl.holder != j {
				return fmt.Errorf("job %d runs in conflict group %v but does not hold its slot", j.seq, ck)
			}
		}
	}
	for _, t := range s.tiers {
		if tierRun[t] != t.running {
			return fmt.Errorf("tier %d: running %d, counted %d", t.level, t.running, tierRun[t])
		}
		if t.limit > 0 && t.running > t.limit {
			return fmt.Errorf("tier %d: running %d > cap %d", t.level, t.running, t.limit)
		}
		if !t.active.Verify(actIdx) {
			return fmt.Errorf("tier %d: active heap broken", t.level)
		}
		for i := 0; i < t.active.Len(); i++ {
			f, key := t.active.At(i)
			if key != f.settledKey() {
				return fmt.Errorf("tier %d: flow of %q filed at settled V %v, has %v", t.level, f.key.name, key, f.settledKey())
			}
			if f.pending+f.running == 0 {
				return fmt.Errorf("tier %d: idle flow of key %q is active", t.level, f.key.name)
			}
			if f.v < 0 && t.floor >= 0 && f.v < t.floor-1e6 {
				return fmt.Errorf("tier %d: flow of %q far below floor", t.level, f.key.name)
			}
		}
	}
	queued := 0
	for _, t := range s.types {
		if typeRun[t] != t.running {
			return fmt.Errorf("type %q: running %d, counted %d", t.name, t.running, typeRun[t])
		}
		if t.cfg.MaxConcurrency > 0 && t.running > t.cfg.MaxConcurrency {
			return fmt.Errorf("type %q: running %d > cap %d", t.name, t.running, t.cfg.MaxConcurrency)
		}
		if !t.lanes.Verify(laneIdx) {
			return fmt.Errorf("type %q: lane heap broken", t.name)
		}
		if !t.aged.Verify(byUIdx) {
			return fmt.Errorf("type %q: aged heap broken", t.name)
		}
		for i := 0; i < t.lanes.Len(); i++ {
			l, key := t.lanes.At(i)
			if key != l.flow.order() {
				return fmt.Errorf("type %q: lane of %q filed at %v, flow is at %v", t.name, l.key.name, key, l.flow.order())
			}
			if l.n == 0 || l.key.capped || l.typ != t {
				return fmt.Errorf("type %q: lane of %q ready with n=%d capped=%v", t.name, l.key.name, l.n, l.key.capped)
			}
		}
	}
	pendingKey := map[*keyState]int{}
	pendingFlow := map[*flow]int{}
	pendingType := map[*typeState]int{}
	parkedKey := 0
	busy := 0
	for _, k := range s.keys {
		if k.running+k.pending > 0 {
			busy++
			if k.busyIdx < 0 || k.busyIdx >= len(s.busy) || s.busy[k.busyIdx] != k {
				return fmt.Errorf("key %q: has work but is not at its place in the busy keys", k.name)
			}
		} else if k.busyIdx >= 0 {
			return fmt.Errorf("key %q: has no work but is listed busy", k.name)
		}
		if keyRun[k] != k.running {
			return fmt.Errorf("key %q: running %d, counted %d", k.name, k.running, keyRun[k])
		}
		if keyReserved[k] != k.reserved {
			return fmt.Errorf("key %q: reserved %d, counted %d", k.name, k.reserved, keyReserved[k])
		}
		// A key's cap binds when a job starts; SetKey may lower it below
		// what already runs, so running > cap is not checked here. The
		// tests check every start against the caps in force.
		if k.capped != k.atCap() {
			return fmt.Errorf("key %q: capped flag %v, at cap %v", k.name, k.capped, k.atCap())
		}
		if !k.parked.Verify(byIdx) {
			return fmt.Errorf("key %q: parked heap broken", k.name)
		}
		if (k.kpIdx >= 0) != (!k.capped && k.parked.Len() > 0) {
			return fmt.Errorf("key %q: in keyParked=%v, capped=%v, parked=%d", k.name, k.kpIdx >= 0, k.capped, k.parked.Len())
		}
		for i := 0; i < k.parked.Len(); i++ {
			j, key := k.parked.At(i)
			if key != j.agedOrder() {
				return fmt.Errorf("key %q: parked job %d filed under a stale key", k.name, j.seq)
			}
			if j.state != stateParked || j.slot != nil {
				return fmt.Errorf("key %q: parked job %d in state %d", k.name, j.seq, j.state)
			}
			pendingKey[k]++
			pendingFlow[j.lane.flow]++
			pendingType[j.lane.typ]++
			parkedKey++
		}
		for _, f := range k.flows {
			if flowRun[f] != f.running {
				return fmt.Errorf("key %q tier %d: flow running %d, counted %d", k.name, f.tier.level, f.running, flowRun[f])
			}
			if (f.actIdx >= 0) != (f.pending+f.running > 0) {
				return fmt.Errorf("key %q tier %d: active=%v with pending %d running %d", k.name, f.tier.level, f.actIdx >= 0, f.pending, f.running)
			}
		}
		if len(k.laneTypes) != len(k.lanes) {
			return fmt.Errorf("key %q: %d lane types for %d lanes", k.name, len(k.laneTypes), len(k.lanes))
		}
		for i, l := range k.lanes {
			if k.laneTypes[i] != l.typ {
				return fmt.Errorf("key %q: lane %d of type %q listed as %q", k.name, i, l.typ.name, k.laneTypes[i].name)
			}
			n := 0
			var jobs []*job
			var runErr error
			last, first := uint64(0), true
			l.run.each(func(j *job, key uint64) {
				switch {
				case j.heap != inRun || key != j.fixedOrder() || l.run.buf[j.idx].j != j:
					runErr = fmt.Errorf("job %d misfiled in a sorted run", j.seq)
				case !first && key <= last:
					runErr = fmt.Errorf("job %d out of order in a sorted run", j.seq)
				}
				last, first = key, false
				jobs = append(jobs, j)
			})
			if runErr != nil {
				return runErr
			}
			switch {
			case l.run.head < len(l.run.buf) && l.run.first != l.run.buf[l.run.head]:
				return fmt.Errorf("key %q type %q: sorted run's front copy is stale", k.name, l.typ.name)
			case l.run.head == len(l.run.buf) && l.run.first != (runEntry{}):
				return fmt.Errorf("key %q type %q: empty sorted run keeps a front entry", k.name, l.typ.name)
			}
			if l.run.head < len(l.run.buf) && l.run.buf[l.run.head].j == nil {
				return fmt.Errorf("key %q type %q: a sorted run starts with a hole", k.name, l.typ.name)
			}
			holes := 0
			for _, e := range l.run.buf[l.run.head:] {
				if e.j == nil {
					holes++
				}
			}
			if holes != l.run.holes {
				return fmt.Errorf("key %q type %q: sorted run counts %d holes, has %d", k.name, l.typ.name, l.run.holes, holes)
			}
			for i := 0; i < l.fixed.Len(); i++ {
				j, key := l.fixed.At(i)
				if j.heap != inFixed || key != (iheap.Key{Hi: j.fixedOrder()}) {
					return fmt.Errorf("job %d misfiled in a fixed heap", j.seq)
				}
				jobs = append(jobs, j)
			}
			for i := 0; i < l.rising.Len(); i++ {
				j, key := l.rising.At(i)
				if j.heap != inRising || key != j.agedOrder() {
					return fmt.Errorf("job %d misfiled in a rising heap", j.seq)
				}
				jobs = append(jobs, j)
			}
			for i := 0; i < l.capped.Len(); i++ {
				j, key := l.capped.At(i)
				if j.heap != inCapped || key != (iheap.Key{Hi: j.seq}) {
					return fmt.Errorf("job %d misfiled in a capped heap", j.seq)
				}
				jobs = append(jobs, j)
			}
			if !l.fixed.Verify(byIdx) || !l.rising.Verify(byIdx) || !l.capped.Verify(byIdx) {
				return fmt.Errorf("key %q type %q: a lane heap is broken", k.name, l.typ.name)
			}
			for _, j := range jobs {
				if j.state != stateQueued || j.lane != l {
					return fmt.Errorf("job %d in a lane heap has state %d", j.seq, j.state)
				}
				if s.aging.urgentOn() && s.aging.pastGrace(j.sub, s.nowLocked()) && j.uidx < 0 && !s.graceDueLocked(j) {
					return fmt.Errorf("job %d past grace but not in its type's aged heap", j.seq)
				}
				n++
			}
			if n != l.n {
				return fmt.Errorf("key %q type %q: lane n=%d, counted %d", k.name, l.typ.name, l.n, n)
			}
			queued += n
			pendingKey[k] += n
			pendingFlow[l.flow] += n
			pendingType[l.typ] += n
			ready := l.n > 0 && !k.capped
			if ready != (l.tyIdx >= 0) {
				return fmt.Errorf("key %q type %q: ready=%v but in type heap=%v", k.name, l.typ.name, ready, l.tyIdx >= 0)
			}
		}
	}
	parkedConflict := 0
	for ck, sl := range s.conflicts {
		if sl.key != ck {
			return fmt.Errorf("conflict slot %v filed under %v", sl.key, ck)
		}
		if sl.holder == nil && len(sl.waiters) == 0 {
			return fmt.Errorf("empty conflict slot %v kept", ck)
		}
		if len(sl.waiters) > 0 && sl.holder == nil {
			return fmt.Errorf("conflict slot %v has waiters but no holder", ck)
		}
		for i, j := range sl.waiters {
			if int(j.idx) != i || j.slot != sl || j.state != stateParked {
				return fmt.Errorf("conflict waiter %d misfiled", j.seq)
			}
			pendingKey[j.lane.key]++
			pendingFlow[j.lane.flow]++
			pendingType[j.lane.typ]++
			parkedConflict++
		}
	}
	if queued != s.nqueued {
		return fmt.Errorf("nqueued %d, counted %d", s.nqueued, queued)
	}
	if busy != len(s.busy) {
		return fmt.Errorf("%d keys listed busy, %d have work", len(s.busy), busy)
	}
	if parkedConflict != s.parkedConflict || parkedKey != s.parkedKey {
		return fmt.Errorf("parked conflict %d/%d key %d/%d", parkedConflict, s.parkedConflict, parkedKey, s.parkedKey)
	}
	if queued+parkedConflict+parkedKey != s.npending {
		return fmt.Errorf("npending %d, counted %d", s.npending, queued+parkedConflict+parkedKey)
	}
	for _, k := range s.keys {
		if pendingKey[k] != k.pending {
			return fmt.Errorf("key %q: pending %d, counted %d", k.name, k.pending, pendingKey[k])
		}
		for _, f := range k.flows {
			if pendingFlow[f] != f.pending {
				return fmt.Errorf("key %q tier %d: flow pending %d, counted %d", k.name, f.tier.level, f.pending, pendingFlow[f])
			}
		}
	}
	for _, t := range s.types {
		if pendingType[t] != t.pending {
			return fmt.Errorf("type %q: pending %d, counted %d", t.name, t.pending, pendingType[t])
		}
	}
	if !s.keyParked.Verify(kpIdx) {
		return fmt.Errorf("keyParked heap broken")
	}
	for i := 0; i < s.keyParked.Len(); i++ {
		k, key := s.keyParked.At(i)
		if top, _ := k.parked.Top(); key != top.agedOrder() {
			return fmt.Errorf("key %q filed in keyParked under a stale key", k.name)
		}
	}
	if err := s.verifyKeysLocked(); err != nil {
		return err
	}
	for _, k := range s.keys {
		for _, l := range k.lanes {
			if l.n > 0 && s.keys[k.name] != k {
				return fmt.Errorf("queued jobs of a forgotten record of key %q", k.name)
			}
		}
	}
	if err := s.verifyGraceLocked(); err != nil {
		return err
	}
	c := &s.counters
	if c.submitted != c.completed+c.failed+c.cancelled+uint64(s.nrunning+s.npending) {
		return fmt.Errorf("submitted %d != completed %d + failed %d + cancelled %d + running %d + pending %d",
			c.submitted, c.completed, c.failed, c.cancelled, s.nrunning, s.npending)
	}
	return nil
}

// verifyGraceLocked checks the grace queue: each entry is a job that has
// not ended, numbered where it stands, holes are counted, and every queued
// job in its fixed phase whose grace is not over has an entry.
func (s *Scheduler) verifyGraceLocked() error {
	g := &s.grace
	holes := 0
	for i, j := range g.buf[g.head:] {
		switch {
		case j == nil:
			holes++
		case !j.inGrace || j.graceAt != g.base+int64(g.head+i):
			return fmt.Errorf("grace queue: job %d at entry %d has inGrace=%v, number %d", j.seq, g.base+int64(g.head+i), j.inGrace, j.graceAt)
		case j.state == stateDone:
			return fmt.Errorf("grace queue: holds ended job %d", j.seq)
		}
	}
	if holes != g.holes {
		return fmt.Errorf("grace queue: %d holes, counted %d", holes, g.holes)
	}
	filed := func(j *job) bool {
		i := j.graceAt - g.base
		return i >= int64(g.head) && i < int64(len(g.buf)) && g.buf[i] == j
	}
	others := append([]*job(nil), s.running...) // jobs that may keep an entry
	for _, sl := range s.conflicts {
		others = append(others, sl.waiters...)
	}
	for _, k := range s.keys {
		for i := 0; i < k.parked.Len(); i++ {
			j, _ := k.parked.At(i)
			others = append(others, j)
		}
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
			return fmt.Errorf("job %d (state %d) has inGrace but no entry %d", j.seq, j.state, j.graceAt)
		}
	}
	if !s.aging.on || s.aging.grace == 0 {
		return nil
	}
	now := s.nowLocked()
	check := func(j *job) error {
		if !s.aging.pastGrace(j.sub, now) && !j.inGrace || j.inGrace && !filed(j) {
			return fmt.Errorf("job %d in its grace period: inGrace=%v, entry %d not its own", j.seq, j.inGrace, j.graceAt)
		}
		return nil
	}
	for _, k := range s.keys {
		for _, l := range k.lanes {
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

// graceDueLocked reports whether j's grace has ended but the dispatcher has
// not yet moved it (it does so at the next dispatch).
func (s *Scheduler) graceDueLocked(j *job) bool {
	return (j.heap == inFixed || j.heap == inRun) && s.aging.grace > 0
}

// verify locks the scheduler and checks its invariants.
func (s *Scheduler) verify() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.verifyLocked()
}

// verifyKeysLocked checks that every key reachable from a queued or
// running job is the one the scheduler files under its name.
func (s *Scheduler) verifyKeysLocked() error {
	for _, j := range s.running {
		if s.keys[j.lane.key.name] != j.lane.key {
			return fmt.Errorf("running job %d belongs to a forgotten record of key %q", j.seq, j.lane.key.name)
		}
	}
	return nil
}
