package rt

import (
	"context"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fairsched/fairsched/fairschedsqlite"
	"github.com/fairsched/fairsched/internal/decide"
	"github.com/fairsched/fairsched/internal/engine"
)

// A replica that begins to shut down or close tells the leader, in a
// Hello, that it runs no durable job type any more, and a durable attempt
// sent to it from then on never starts: it ends at once, lost, for the
// leader to retry elsewhere. Started, its goroutine would begin while
// Shutdown or Close waits for the replica's goroutines, or after they
// returned.
func TestReplicaRunAfterStop(t *testing.T) {
	for _, stop := range []string{"Close", "Shutdown"} {
		t.Run(stop, func(t *testing.T) {
			st, err := fairschedsqlite.Open(filepath.Join(t.TempDir(), "jobs.db"))
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, st.Close()) })
			var remote *decide.Remote
			out := new(decide.Outbox)
			var runs atomic.Int32
			ran := make(chan struct{}, 2)
			r, err := New(Config{
				Engine: engine.Config{MaxConcurrency: 1, CostAlpha: 0.3, DefaultCost: 1, IdleTTL: int64(10 * time.Minute / time.Microsecond)},
				Errors: testErrors,
				Store:  st,
				Handlers: map[string]*Handler{"mail": {Name: "mail", ArgType: reflect.TypeOf(""), Run: func(context.Context, []byte) error {
					runs.Add(1)
					ran <- struct{}{}
					return nil
				}}},
				Decider: func(e *engine.Engine, g decide.Grantee, _ func(func(now int64))) decide.Decider {
					remote = decide.NewRemote("r1", e, g, out, 1)
					return remote
				},
			})
			require.NoError(t, err)
			receive := func(m decide.Msg) {
				r.Deliver(func(now int64) { remote.Receive([]decide.Msg{m}, now) })
			}
			runMsg := func(id, sync uint64) decide.Msg {
				return decide.Msg{Kind: decide.Run, Term: 1, Replica: "r1", Sync: sync, Seq: id, Attempt: 1,
					Desc: engine.Desc{Type: "mail"}, Args: []byte(`"hi"`)}
			}
			receive(decide.Msg{Kind: decide.Resync, Term: 1, Replica: "r1"}) // term 1, Hello 1
			receive(runMsg(7, 1))
			<-ran // sent before the replica stops: it runs
			if stop == "Close" {
				require.NoError(t, r.Close())
			} else {
				require.NoError(t, r.Shutdown(context.Background()))
				require.NoError(t, r.Close())
			}
			receive(runMsg(8, 1)) // sent before the leader heard Hello 2: dropped, the leader counts it lost
			receive(runMsg(9, 2)) // cannot be sent after Hello 2, which has no types: lost at once all the same

			assert.Equal(t, int32(1), runs.Load(), "only the attempt sent before the replica stopped runs")
			var hellos []decide.Msg
			done := map[uint64]decide.Msg{}
			for _, m := range out.Take() {
				switch m.Kind {
				case decide.Hello:
					hellos = append(hellos, m)
				case decide.Done:
					done[m.Seq] = m
				}
			}
			require.Len(t, hellos, 2)
			assert.Equal(t, []string{"mail"}, hellos[0].Types)
			assert.Empty(t, hellos[1].Types, "stopping, it tells the leader it runs no type")
			assert.Equal(t, uint64(2), hellos[1].Sync)
			require.Contains(t, done, uint64(7))
			assert.Equal(t, engine.Completed, done[7].Outcome)
			assert.NotContains(t, done, uint64(8))
			require.Contains(t, done, uint64(9), "an attempt sent after it stopped is answered")
			assert.Equal(t, engine.Failed, done[9].Outcome)
			assert.Equal(t, decide.DoneLost, done[9].Flags, "lost: the leader retries it elsewhere")
			assert.Contains(t, done[9].Err, "shutting down")
		})
	}
}
