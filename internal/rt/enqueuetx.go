package rt

import (
	"context"
	"errors"
	"fmt"

	"github.com/fairsched/fairsched/internal/store"
)

// EnqueueTx is the API's EnqueueTx, which documents it.
func EnqueueTx[Tx any](ctx context.Context, s *Runtime, tx Tx, job *Job, args any) (int64, error) {
	if ctx == nil {
		panic("fairsched: EnqueueTx with a nil context")
	}
	d := s.durable
	if d == nil {
		return 0, errors.New("fairsched: EnqueueTx needs a Store in Config")
	}
	ins, ok := d.st.(store.TxInserter[Tx])
	if !ok {
		return 0, fmt.Errorf("%w: %T", ErrTxNotSupported, tx)
	}
	if job.After != nil {
		return 0, errors.New("fairsched: EnqueueTx does not take Job.After: use Enqueue")
	}
	p := []EnqueueParams{{Job: *job, Args: args}}
	rec, err := d.record(&p[0])
	if err != nil {
		return 0, err
	}
	a, err := s.admitDurable(p, []*store.Job{rec})
	if err != nil {
		return 0, unbatched(err)
	}
	defer s.wg.Done() // admitDurable's
	// Counted until the insert, not until tx commits: when, or whether,
	// it does is the caller's. Deferred, so that a panic in the insert
	// (the caller's tx) leaves no count behind.
	defer func() {
		s.mu.Lock()
		s.releaseLocked(a)
		s.mu.Unlock()
	}()
	if err := ins.InsertTx(ctx, tx, rec); err != nil {
		return 0, err
	}
	return rec.ID, nil
}
