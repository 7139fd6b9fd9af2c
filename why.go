package fairsched

import (
	"errors"
	"strconv"

	"github.com/fairsched/fairsched/internal/engine"
)

// WaitReason says what holds a job that has not started (JobInfo.Waiting,
// Stats.Waiting): the first of these, in this order, that applies.
type WaitReason uint8

const (
	NotWaiting     WaitReason = WaitReason(engine.NotWaiting)    // running
	WaitNotBefore  WaitReason = WaitReason(engine.WhyNotBefore)  // its NotBefore, or a retry's backoff
	WaitDependency WaitReason = WaitReason(engine.WhyDependency) // a job it runs after
	WaitPaused     WaitReason = WaitReason(engine.WhyPaused)     // its key or type is paused
	WaitRate       WaitReason = WaitReason(engine.WhyRate)       // its key or type is out of tokens
	WaitTierCap    WaitReason = WaitReason(engine.WhyTierCap)    // its tier runs its cap
	WaitTypeCap    WaitReason = WaitReason(engine.WhyTypeCap)    // its type runs its cap
	WaitKeyCap     WaitReason = WaitReason(engine.WhyKeyCap)     // its key runs its cap
	WaitConflict   WaitReason = WaitReason(engine.WhyConflict)   // a running job of its conflict group has its ID
	WaitResource   WaitReason = WaitReason(engine.WhyResource)   // a named resource lacks free units
	// WaitTurn: nothing but its turn: a free slot, or the jobs ahead of it
	// in the order.
	WaitTurn WaitReason = WaitReason(engine.WhyTurn)
	// WaitNoHandler: a durable job found in the Store whose type has no
	// handler in this process. Its type is held as if paused (it takes
	// the place of WaitPaused), until a Scheduler with a handler starts.
	WaitNoHandler WaitReason = WaitReason(engine.NumWhys)
	// WaitReplicasFull: on the replica that leads (Stats.Cluster), every
	// replica it may run on runs its Capacity.
	WaitReplicasFull WaitReason = WaitReason(engine.WhyReplicasFull)
	// WaitNoReplica: on the replica that leads, no live replica has a
	// handler of its type (a durable job), or the replica it was submitted
	// on is gone.
	WaitNoReplica WaitReason = WaitReason(engine.WhyNoReplica)
)

var waitReasonNames = [...]string{
	NotWaiting: "not-waiting", WaitNotBefore: "not-before", WaitDependency: "dependency",
	WaitPaused: "paused", WaitRate: "rate", WaitTierCap: "tier-cap", WaitTypeCap: "type-cap",
	WaitKeyCap: "key-cap", WaitConflict: "conflict", WaitResource: "resource", WaitTurn: "turn",
	WaitNoHandler: "no-handler", WaitReplicasFull: "replicas-full", WaitNoReplica: "no-replica",
}

// String returns the reason's name, as the Prometheus collector labels it.
func (r WaitReason) String() string {
	if int(r) < len(waitReasonNames) {
		return waitReasonNames[r]
	}
	return "WaitReason(" + strconv.Itoa(int(r)) + ")"
}

// MarshalText returns the reason's name: JSON shows reasons, and maps
// keyed by them, by name.
func (r WaitReason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText sets r to the reason named text.
func (r *WaitReason) UnmarshalText(text []byte) error {
	for i, name := range waitReasonNames {
		if name == string(text) {
			*r = WaitReason(i)
			return nil
		}
	}
	return errors.New("fairsched: no WaitReason is named " + strconv.Quote(string(text)))
}

// WaitReasons lists every reason a job may wait, in order.
func WaitReasons() []WaitReason {
	out := make([]WaitReason, 0, engine.NumWhys)
	for r := WaitNotBefore; r <= WaitNoReplica; r++ {
		out = append(out, r)
	}
	return out
}
