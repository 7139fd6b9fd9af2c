package cluster

import (
	"context"
	"time"

	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/store"
)

// The run-time changes of the configuration (doc.go, Changes): this
// replica's go to the cluster's log; the log's come to this replica's
// Remote and, while it leads, to the leader's engine.

// appendChanges appends the changes the Remote applied to the cluster's
// log, in the order applied, as they come, and wakes the run loop to
// apply the log. An append that fails is tried again each period, and
// logged; what is held at Stop gets one last try.
func (n *Node) appendChanges() {
	defer n.wg.Done()
	box := n.remote.Changes()
	pending := box.Pending()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var held []decide.Change // taken from the box, not appended yet
	for {
		select {
		case <-pending:
		case <-retry.C:
		case <-n.stop:
			held = append(held, box.Take()...)
			if len(held) > 0 {
				ctx, cancel := context.WithTimeout(context.Background(), n.every())
				held = n.appendHeld(ctx, held)
				cancel()
			}
			if len(held) > 0 {
				n.log.Error("fairsched: a replica stopped before it could append its changes of the configuration to the cluster's log: the other replicas and the leader do not have them",
					"replica", n.cfg.Name, "changes", len(held))
			}
			return
		}
		held = append(held, box.Take()...)
		if len(held) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.every())
		held = n.appendHeld(ctx, held)
		cancel()
		if len(held) > 0 {
			retry.Reset(n.every())
			continue
		}
		select {
		case n.appended <- struct{}{}:
		default: // the loop has one to read already
		}
	}
}

// appendHeld appends held, in order, until one fails, and returns those
// not appended.
func (n *Node) appendHeld(ctx context.Context, held []decide.Change) []decide.Change {
	for len(held) > 0 {
		body, err := decide.EncodeChange(held[0])
		if err != nil { // a change the Remote's engine took is of a kind known
			n.log.Error("fairsched: a change of the configuration cannot be encoded: it stays on this replica",
				"replica", n.cfg.Name, "change", held[0], "err", err)
			held = held[1:]
			continue
		}
		if _, err := n.cfg.Store.AppendChange(ctx, n.cfg.Fingerprint, body); err != nil {
			if n.ctx.Err() == nil {
				n.log.Warn("fairsched: a replica could not append a change of the configuration to the cluster's log; it tries again",
					"replica", n.cfg.Name, "change", held[0], "err", err)
			}
			return held
		}
		held = held[1:]
	}
	return nil
}

// syncChanges applies the changes of the cluster's log that this replica,
// and its term as the leader if it leads, have not applied.
func (n *Node) syncChanges() {
	n.mu.Lock()
	l := n.lead
	n.mu.Unlock()
	after := n.applied
	if l != nil {
		after = min(after, l.applied)
	}
	var recs []store.ChangeRecord
	err := n.call(func(ctx context.Context) (err error) {
		recs, err = n.cfg.Store.Changes(ctx, n.cfg.Fingerprint, after)
		return err
	})
	if err != nil {
		if n.ctx.Err() == nil {
			n.log.Warn("fairsched: a replica could not read the cluster's changes of the configuration", "replica", n.cfg.Name, "err", err)
		}
		return
	}
	n.applyChanges(recs, l)
}

// logged is a change of the log, decoded: ok false if it could not be.
type logged struct {
	seq int64
	c   decide.Change
	ok  bool
}

// applyChanges applies recs, changes of the cluster's log in its order,
// each to what has not applied it: l, this replica's term as the leader
// (nil: none), then the Remote, through the run-time layer, so that a
// replica that leads shows a change (Stats) only once it decides by it.
// A change this process cannot read (a newer version's) is logged and
// skipped; one an engine refuses changed nothing there, and is logged.
// Start, and the run loop only.
func (n *Node) applyChanges(recs []store.ChangeRecord, l *leading) {
	if len(recs) == 0 {
		return
	}
	cs := make([]logged, len(recs))
	for i, rec := range recs {
		c, err := decide.DecodeChange(rec.Body)
		if err != nil {
			n.log.Error("fairsched: a change of the configuration in the cluster's log cannot be read by this replica: it is skipped",
				"replica", n.cfg.Name, "seq", rec.Seq, "err", err)
		}
		cs[i] = logged{rec.Seq, c, err == nil}
	}
	if l != nil {
		l.apply(cs)
	}
	var mine []logged
	for _, c := range cs {
		if c.seq > n.applied {
			mine = append(mine, c)
		}
	}
	if len(mine) > 0 {
		var refused []logged
		n.host.Deliver(func(now int64) {
			for _, c := range mine {
				if c.ok && !n.remote.Apply(c.c, now) {
					refused = append(refused, c)
				}
			}
		})
		for _, c := range refused {
			n.log.Warn("fairsched: a replica's engine refused a change of the configuration from the cluster's log",
				"replica", n.cfg.Name, "seq", c.seq, "change", c.c)
		}
		n.applied = mine[len(mine)-1].seq
	}
	if n.cfg.OnChanges != nil {
		n.cfg.OnChanges(recs[len(recs)-1].Seq)
	}
}
