package fairschedtest

import (
	"testing"
	"time"

	"github.com/fairsched/fairsched"
)

var _ fairsched.Clock = (*Clock)(nil) // it is a fairsched.Clock

func TestClockFiresInVirtualTime(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewClock(t0)
	var at []time.Duration
	c.AfterFunc(2*time.Second, func() { at = append(at, c.Now().Sub(t0)) })
	stop := c.AfterFunc(time.Second, func() { t.Error("a stopped timer fired") })
	c.AfterFunc(time.Second, func() { at = append(at, c.Now().Sub(t0)) })
	if !stop() || c.Timers() != 2 {
		t.Fatalf("stop or Timers wrong: %d timers", c.Timers())
	}
	c.Advance(3 * time.Second)
	if len(at) != 2 || at[0] != time.Second || at[1] != 2*time.Second {
		t.Fatalf("fired at %v, want [1s 2s]", at)
	}
	c.Set(t0.Add(time.Hour))
	if got := c.Now().Sub(t0); got != time.Hour || c.Timers() != 0 {
		t.Fatalf("now %v with %d timers", got, c.Timers())
	}
}
