package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestSyncEngine(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	// At a third of the default scale: about 4 seconds, with the user's
	// sync still lasting longer than the starvation bound.
	res, err := run(context.Background(), options{Scale: 0.33, Seed: 5}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())

	// Structural claims: exact.
	if res.Failed != 0 {
		t.Errorf("%d files failed", res.Failed)
	}
	for _, k := range []string{profileA, profileB, user} {
		if res.Jobs[k] == 0 {
			t.Errorf("%s synced no file", k)
		}
	}
	total := 0
	for _, n := range res.Jobs {
		total += n
	}
	if total != res.Submitted {
		t.Errorf("%d files submitted, %d synced", res.Submitted, total)
	}
	if len(res.Rows) < 10 {
		t.Errorf("the chart has %d rows; want at least 10", len(res.Rows))
	}
	if res.UrgentStarts == 0 {
		t.Error("no file became urgent, though the user's sync outlasted the starvation bound")
	}
	if strings.Contains(out.String(), "FAILED") {
		t.Error("output reports a failed check")
	}

	// Real-time claims: generous margins, the machine may be busy.
	// The starvation bound: MaxWait, plus the time for a slot to free.
	if limit := res.Bound + res.LongestJob + 250*time.Millisecond; res.LongestWait > limit {
		t.Errorf("a watch file waited %v; want at most %v (bound %v + one transfer %v + slack)",
			res.LongestWait, limit, res.Bound, res.LongestJob)
	}
	// The fair share: with both profiles busy, A settles at 10-11 slots, B 5-6.
	if a := res.Before[profileA]; a < 8.5 || a > 12.01 {
		t.Errorf("%s held %.1f slots while both profiles were busy; want about 10.5", profileA, a)
	}
	if b := res.Before[profileB]; b < 3.5 || b > 6.01 {
		t.Errorf("%s held %.1f slots while both profiles were busy; want about 5.5", profileB, b)
	}
	// During the user's sync: the foreground first, B's reservation kept.
	if u, a := res.During[user], res.During[profileA]; u < a || u < 8 {
		t.Errorf("during the user's sync the user held %.1f slots and %s %.1f; want the user far ahead", u, profileA, a)
	}
	if b := res.During[profileB]; b < 1.5 {
		t.Errorf("%s held %.1f slots during the user's sync; want its 2 reserved", profileB, b)
	}
}

// TestSyncEngineInterrupted checks that cancelling the context ends the
// run promptly, with every goroutine gone.
func TestSyncEngineInterrupted(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	begin := time.Now()
	if _, err := run(ctx, options{Scale: 1, Seed: 5}, &bytes.Buffer{}); err == nil {
		t.Error("run returned no error after its context ended")
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("run took %v to stop after its context ended", d)
	}
}
