package fairsched

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Contexts derived from a job's context cost what they cost on a standard
// context: the context package finds the job context's AfterFunc and
// starts no goroutine to watch it. Without it, each of the 200 would start
// one.
func TestDerivedContextsStartNoGoroutine(t *testing.T) {
	s := newTestScheduler(t, Config{})
	var children []context.Context
	err := s.RunSync(context.Background(), Job{}, func(ctx context.Context) error {
		before := runtime.NumGoroutine()
		for i := 0; i < 100; i++ {
			c, cancel := context.WithCancel(ctx)
			defer cancel()
			d, cancelD := context.WithTimeout(ctx, time.Hour)
			defer cancelD()
			children = append(children, c, d)
		}
		require.Less(t, runtime.NumGoroutine()-before, 10, "goroutines started by 200 derived contexts")
		for _, c := range children {
			require.NoError(t, c.Err(), "a derived context is live while the job runs")
		}
		return nil
	})
	require.NoError(t, err)
	for _, c := range children {
		<-c.Done() // the job's context ended when its function returned
		require.ErrorIs(t, c.Err(), context.Canceled)
	}
}

// A context derived from a job's ends when the job's caller gives up, and
// AfterFunc's stop reports whether it stopped f in time.
func TestJobContextAfterFunc(t *testing.T) {
	s := newTestScheduler(t, Config{})
	parent, cancelParent := context.WithCancel(context.Background())
	ran := make(chan struct{})
	err := s.RunSync(parent, Job{}, func(ctx context.Context) error {
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		stopped := context.AfterFunc(ctx, func() { t.Error("a stopped AfterFunc ran") })
		require.True(t, stopped(), "stop before the context ends")
		require.False(t, stopped(), "a second stop")
		context.AfterFunc(ctx, func() { close(ran) })
		cancelParent()
		<-child.Done()
		<-ran
		require.ErrorIs(t, child.Err(), context.Canceled)
		return nil
	})
	require.NoError(t, err)
	// Registered after the end: runs at once.
	var kept context.Context
	require.NoError(t, s.RunSync(context.Background(), Job{}, func(ctx context.Context) error { kept = ctx; return nil }))
	late := make(chan struct{})
	stop := context.AfterFunc(kept, func() { close(late) })
	<-late
	require.False(t, stop())
}
